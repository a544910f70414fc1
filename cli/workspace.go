package cli

import (
	"context"
	"flag"
	"path/filepath"
	"sort"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// workspaceDefault makes every command with a --workspace flag fall back,
// when neither the flag, CE_WORKSPACE nor --config named one, to the one
// room served from the current directory; with none or several it says
// the flag is required. Before, the default was "workspace.md", a name
// nobody has, and the error named that file.
func workspaceDefault(c *ffcli.Command) {
	if c.FlagSet.Lookup("workspace") == nil || c.Exec == nil {
		return
	}
	fs, exec := c.FlagSet, c.Exec
	c.Exec = func(ctx context.Context, args []string) error {
		if !flagGiven(fs, "workspace") {
			doc, err := servedHere(".")
			if err != nil {
				return err
			}
			if err := fs.Set("workspace", doc); err != nil {
				return err
			}
		}
		return exec(ctx, args)
	}
}

// flagGiven says whether name was set by any source (ff sets the
// environment's and the config file's values through the FlagSet too).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// servedHere is the document of the one room served from dir: the one
// operator credential (FILE.commonroom.owner) there whose process lives.
func servedHere(dir string) (string, error) {
	owners, _ := filepath.Glob(filepath.Join(dir, "*.commonroom.owner"))
	var docs []string
	for _, o := range owners {
		doc := strings.TrimSuffix(o, ".commonroom.owner")
		if of, err := readOwnerFile(doc); err == nil && processAlive(of.PID) {
			docs = append(docs, doc)
		}
	}
	sort.Strings(docs)
	switch len(docs) {
	case 1:
		return docs[0], nil
	case 0:
		return "", room.Errorf(room.KindInvalidRequest,
			"--workspace FILE is required (or CE_WORKSPACE): no room is being served from this directory")
	default:
		n := len(docs)
		if n > 5 {
			docs = append(docs[:5], "…")
		}
		return "", room.Errorf(room.KindInvalidRequest,
			"--workspace FILE is required (or CE_WORKSPACE): %d rooms are served from this directory (%s)", n, strings.Join(docs, ", "))
	}
}
