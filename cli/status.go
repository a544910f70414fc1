package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

func statusCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce status", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "status",
		ShortUsage: "ce status --workspace FILE [--json]",
		ShortHelp:  "show the room's version, counts and whether it is being served",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return &exitError{code: exitUsage, err: errors.New("status takes no arguments")}
			}
			eng, st, err := readOnly(ctx, *workspace)
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := eng.Status(ctx, st.Reader, room.Operator(eng.HostID), room.Empty{})
			if err != nil {
				return err
			}
			storage, err := eng.Storage(ctx, st.Reader)
			if err != nil {
				return err
			}
			serving := map[string]any{"serving": false}
			// Reading the credential and asking whether its process lives never
			// touches the writer lock, so status cannot get in a starting serve's way.
			if of, err := readOwnerFile(eng.DocPath); err == nil && processAlive(of.PID) {
				tr := of.Transport
				if tr == nil {
					tr = newOwnerTransport(room.Hint{Type: "loopback", Mode: "local"})
				}
				serving = map[string]any{"serving": true, "pid": of.PID, "type": tr.Type, "mode": tr.Mode, "encrypted": tr.Encrypted, "describe": tr.Describe}
			}
			if *asJSON {
				return printJSON(env.Stdout, map[string]any{"status": s, "listener": serving, "storage": storage})
			}
			path := ""
			if s.Path != nil {
				path = *s.Path
			}
			fmt.Fprintf(env.Stdout, "workspace=%s version=%d path=%s\n", s.WorkspaceID, s.Version, path)
			fmt.Fprintf(env.Stdout, "participants=%d active_leases=%d pending_proposals=%d\n", s.Participants, s.ActiveLeases, s.PendingProposals)
			sp := storage.Space
			fmt.Fprintf(env.Stdout, "sidecar=%q db_bytes=%d wal_bytes=%d page_size=%d pages=%d free_pages=%d auto_vacuum=%s\n",
				byteSize(sp.Bytes), sp.DBBytes, sp.WALBytes, sp.PageSize, sp.PageCount, sp.FreePages, sp.AutoVacuum)
			fmt.Fprintf(env.Stdout, "pruned=%s\n", prunedLine(storage.Pruned))
			if serving["serving"] == true {
				fmt.Fprintf(env.Stdout, "transport=%s pid=%v\n", serving["describe"], serving["pid"])
			} else {
				fmt.Fprintln(env.Stdout, "transport=none (not being served)")
			}
			return nil
		},
	}
}

// prunedLine is what retention removed, "none" or "handoffs=3 versions=40"
// in name order.
func prunedLine(p map[string]int64) string {
	if len(p) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(p))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, p[k])
	}
	return strings.Join(parts, " ")
}
