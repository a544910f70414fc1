package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/httpapi"
	"github.com/commonroom/ce/room"
)

// compactResult is what `ce compact --json` prints.
type compactResult struct {
	Sidecar string `json:"sidecar"`
	// Serving says the room was running: the compaction went through it.
	Serving bool `json:"serving"`
	// Method is "vacuum" (no room serving: one VACUUM rebuilt the whole
	// sidecar) or "incremental" (through the running room: its free pages
	// given back in steps, the room serving throughout).
	Method       string     `json:"method"`
	Before       room.Space `json:"before"`
	After        room.Space `json:"after"`
	TookMS       int64      `json:"took_ms"`
	Steps        int        `json:"steps,omitempty"`
	PagesFreed   int64      `json:"pages_freed"`
	Checkpointed bool       `json:"checkpointed"`
}

// compactCommand is `ce compact`: give the sidecar's free space back to the
// filesystem (issue 26 item 3). With no room serving it rebuilds the
// sidecar with one VACUUM under the writer lock; while one serves, it asks
// the room (operator credential, owner listener) to give its free pages
// back in short steps through its writer, so the room keeps answering.
func compactCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce compact", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "compact",
		ShortUsage: "ce compact --workspace FILE [--json]",
		ShortHelp:  "give the sidecar's free space back to the filesystem, while the room serves or not",
		LongHelp: "With no room serving FILE: one VACUUM rebuilds the sidecar (free pages given back, tables packed; " +
			"it needs free disk space about twice the sidecar's new size, and a full disk leaves it unchanged). " +
			"While a room serves FILE: the room gives its free pages back in short steps through its writer, " +
			"answering requests between them. Either way, prints the sidecar's size before and after.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("compact takes no arguments")
			}
			res, err := compactRoom(ctx, env, *workspace)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			how := "offline, one VACUUM"
			if res.Serving {
				how = fmt.Sprintf("through the running room, %d steps", res.Steps)
			}
			fmt.Fprintf(env.Stdout, "compacted %s (%s) in %s\n", res.Sidecar, how, (time.Duration(res.TookMS) * time.Millisecond).String())
			fmt.Fprintf(env.Stdout, "  before: %s\n", spaceLine(res.Before))
			fmt.Fprintf(env.Stdout, "  after:  %s\n", spaceLine(res.After))
			if res.Serving && !res.Checkpointed {
				fmt.Fprintln(env.Stdout, "  the database file reaches its new size at the room's next checkpoint")
			}
			return nil
		},
	}
}

// spaceLine is a sidecar's size on one line, as ce compact and ce status
// print it.
func spaceLine(s room.Space) string {
	return fmt.Sprintf("%s (db %s + wal %s), %d pages of %d bytes, %d free, auto_vacuum %s",
		byteSize(s.Bytes), byteSize(s.DBBytes), byteSize(s.WALBytes), s.PageCount, s.PageSize, s.FreePages, s.AutoVacuum)
}

// compactRoom compacts the sidecar of docPath, through the running room
// when one serves it, else in this process under the writer lock.
func compactRoom(ctx context.Context, env Env, docPath string) (*compactResult, error) {
	abs, err := room.ExistingDocPath(docPath)
	if err != nil {
		return nil, err
	}
	dbPath := room.SidecarPath(abs)
	if st, err := os.Stat(dbPath); errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		return nil, room.Errorf(room.KindNotFound, "%s has no room yet (no %s): there is nothing to compact", docPath, filepath.Base(dbPath))
	} else if err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "cannot read %s: %v", dbPath, err)
	}
	oc, lock, err := servingRoom(abs)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	res := &compactResult{Sidecar: dbPath}
	if oc != nil {
		err = compactOnline(ctx, env.Stderr, oc, res)
	} else {
		defer lock.Release()
		err = compactOffline(ctx, dbPath, res)
	}
	if err != nil {
		return nil, err
	}
	res.TookMS = time.Since(started).Milliseconds()
	return res, nil
}

// compactOffline rebuilds the sidecar with one VACUUM. Opening the store
// applies what ce serve would (migrations, the conversion to incremental
// auto-vacuum, itself a VACUUM: then there is nothing left to do).
func compactOffline(ctx context.Context, dbPath string, res *compactResult) error {
	res.Method = "vacuum"
	before, err := room.SidecarSpace(ctx, dbPath)
	if err != nil {
		return room.Errorf(room.KindInvalidRequest, "%s is not a sidecar ce can read: %v", dbPath, err)
	}
	st, err := room.OpenStore(ctx, dbPath, false)
	if err != nil {
		return err
	}
	defer st.Close()
	conv, converted := st.Conversion()
	if !converted || conv.Err != nil {
		if err := st.CompactOffline(ctx); err != nil {
			return err
		}
	}
	after, err := st.Space(ctx)
	if err != nil {
		return err
	}
	res.Before, res.After = before, after
	res.PagesFreed = max(before.PageCount-after.PageCount, 0)
	res.Checkpointed = true
	return nil
}

// compactOnline asks the running room to give its free pages back, one
// bounded request after another until it says it is done, and reports
// progress on progress (stderr) between requests.
func compactOnline(ctx context.Context, progress io.Writer, oc *ownerClient, res *compactResult) error {
	res.Serving, res.Method = true, "incremental"
	for first := true; ; first = false {
		var a httpapi.CompactAnswer
		if err := oc.call(ctx, "POST", "/owner/compact", map[string]any{}, &a); err != nil {
			return err
		}
		if first {
			res.Before = a.Before
		}
		res.After = a.After
		res.Steps += a.Steps
		res.PagesFreed += a.PagesFreed
		res.Checkpointed = a.Checkpointed
		if a.Done {
			return nil
		}
		fmt.Fprintf(progress, "ce: compacting: %d free pages left\n", a.After.FreePages)
	}
}
