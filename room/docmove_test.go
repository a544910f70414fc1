package room_test

// The document's directory moves while the room serves it (issue 25 item
// 5): `mv dir dir.old`, then nothing, a new directory or a symlink to
// another place where it was. The room keeps the directory and the sidecar
// it opened (by descriptor), answers unavailable to what needs the file,
// serves reads from the sidecar, creates nothing anywhere, and resumes by
// itself once the directory is back.

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// withDocInDir puts the document in its own directory, TempDir/dir, so a
// test can move that directory under the serving room.
func withDocInDir() envOption {
	return func(e *env) {
		dir := filepath.Join(filepath.Dir(e.doc), "dir")
		if err := os.Mkdir(dir, 0o755); err != nil {
			e.tb.Fatal(err)
		}
		moved := filepath.Join(dir, filepath.Base(e.doc))
		if err := os.Rename(e.doc, moved); err != nil {
			e.tb.Fatal(err)
		}
		e.doc = moved
	}
}

// placement is what is put where the document's directory was.
type placement struct {
	name string
	put  func(t *testing.T, dir, elsewhere string)
	undo func(t *testing.T, dir string)
}

var placements = []placement{
	{"nothing in its place", func(*testing.T, string, string) {}, func(*testing.T, string) {}},
	{"a new empty directory in its place",
		func(t *testing.T, dir, _ string) { must(t, os.Mkdir(dir, 0o755)) },
		func(t *testing.T, dir string) { must(t, os.Remove(dir)) }},
	{"a symlink to another directory in its place",
		func(t *testing.T, dir, elsewhere string) { must(t, os.Symlink(elsewhere, dir)) },
		func(t *testing.T, dir string) { must(t, os.Remove(dir)) }},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// listDir is every name in dir, sorted ("" for a missing directory).
func listDir(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// TestStore_ConnectionsOpenedAfterTheMoveReachTheHeldSidecar: every
// connection a store opens after its directory moved — the read pool's,
// the checkpointer's — reaches the sidecar it opened at start, and none
// creates a file where the directory was. (Before issue 25 item 5, a read
// connection opened then made a new, empty sidecar by path, and every read
// on it failed until a restart.)
func TestStore_ConnectionsOpenedAfterTheMoveReachTheHeldSidecar(t *testing.T) {
	for _, pl := range placements {
		t.Run(pl.name+": the new connections read the room's sidecar and create nothing", func(t *testing.T) {
			ctx := context.Background()
			base := t.TempDir()
			dir, elsewhere := filepath.Join(base, "dir"), filepath.Join(base, "elsewhere")
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.Mkdir(elsewhere, 0o755))
			st, err := room.OpenStore(ctx, filepath.Join(dir, "idea.md.commonroom.db"), false)
			must(t, err)
			t.Cleanup(func() { st.Close() })
			if _, err := st.Writer.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES ('probe', 'the room''s sidecar')`); err != nil {
				t.Fatal(err)
			}
			must(t, os.Rename(dir, dir+".old"))
			pl.put(t, dir, elsewhere)
			// The read pool has opened no connection yet: holding eight at
			// once opens eight, all after the move.
			if n := st.Reader.Stats().OpenConnections; n != 0 {
				t.Fatalf("the read pool holds %d connections before the move; this test needs it to open them after", n)
			}
			var conns []*sql.Conn
			for range 8 {
				c, err := st.Reader.Conn(ctx)
				must(t, err)
				conns = append(conns, c)
			}
			for i, c := range conns {
				var v string
				if err := c.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'probe'`).Scan(&v); err != nil || v != "the room's sidecar" {
					t.Fatalf("read connection %d: %q, %v; want the row the writer wrote to the room's sidecar", i, v, err)
				}
				c.Close()
			}
			// So does the checkpointer's, opened after the move too.
			must(t, st.SetWALAutocheckpoint(ctx, 1000))
			if _, _, err := st.Checkpoint(ctx); err != nil {
				t.Fatalf("a checkpoint on a connection opened after the move: %v", err)
			}
			if got := listDir(t, dir); got != "" {
				t.Fatalf("where the directory was: %q, want nothing", got)
			}
			if got := listDir(t, elsewhere); got != "" {
				t.Fatalf("the symlink's target holds %q, want nothing", got)
			}
		})
	}
}

