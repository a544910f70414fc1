package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// openCommand prints a fresh owner-page link for a running room: each link's
// key works once, so opening the page in another browser needs a new one.
func openCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce open", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "open",
		ShortUsage: "ce open --workspace FILE [--json]",
		ShortHelp:  "print a fresh one-time link to the owner page of a running room",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("open takes no arguments")
			}
			abs, err := room.ExistingDocPath(*workspace)
			if err != nil {
				return err
			}
			of, err := readOwnerFile(abs)
			if err != nil || !processAlive(of.PID) {
				return room.Errorf(room.KindUnavailable, "%s is not being served; start it with `ce serve %s`", *workspace, *workspace)
			}
			var out struct {
				Key string `json:"key"`
			}
			if err := newOwnerClient(of).call(ctx, "POST", "/owner/key", nil, &out); err != nil {
				return err
			}
			url := of.OwnerURL + "/?key=" + out.Key
			if *asJSON {
				return printJSON(env.Stdout, map[string]string{"owner_url": url})
			}
			fmt.Fprintln(env.Stdout, url)
			return nil
		},
	}
}
