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

// wantAway checks err is the unavailable answer of a moved directory.
func wantAway(t *testing.T, what string, err error) {
	t.Helper()
	e := room.AsError(err)
	if err == nil || e.Kind != room.KindUnavailable || !errors.Is(err, room.ErrDocMoved) {
		t.Fatalf("%s while the directory is away: %v, want unavailable (the directory moved)", what, err)
	}
	for _, s := range []string{"idea.md", "moved or replaced", "Nothing was written", "Move the directory back", "serve the file where it is now"} {
		if !strings.Contains(e.Message, s) {
			t.Fatalf("%s: message %q does not say %q", what, e.Message, s)
		}
	}
	if len(e.Message) > 256 {
		t.Fatalf("%s: message is %d bytes; an error body keeps 256, so what to do would be cut", what, len(e.Message))
	}
}

func TestDocDirMoved(t *testing.T) {
	for _, pl := range placements {
		t.Run(pl.name+": what needs the file is refused, reads are served, nothing is created, and the room resumes when it is back", func(t *testing.T) {
			d := newDocRoom(t, withDocInDir())
			ctx := context.Background()
			dir := filepath.Dir(d.doc)
			old := dir + ".old"
			elsewhere := filepath.Join(filepath.Dir(dir), "elsewhere")
			must(t, os.Mkdir(elsewhere, 0o755))
			// A document of the same name in the other place: the room
			// must neither read nor write it.
			const stranger = "# Someone else's idea\n"
			must(t, os.WriteFile(filepath.Join(elsewhere, "idea.md"), []byte(stranger), 0o644))
			a := d.join("agent", agent(room.CapApprove)...)
			approved := d.mustPropose(a, "Goals", "## Goals\n\nship it well\n")
			d.mustApprove(approved.ProposalID)
			before := d.dump(`SELECT * FROM versions ORDER BY version`) + d.dump(`SELECT * FROM proposals ORDER BY proposal_id`)

			must(t, os.Rename(dir, old))
			pl.put(t, dir, elsewhere)
			newPlace := listDir(t, dir)
			heldFiles := listDir(t, old)

			_, err := d.commitProposal(a, approved.ProposalID)
			wantAway(t, "committing an approved proposal", err)
			_, err = d.commit(d.op(), room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "raw", Content: refOf("# raw\n")})
			wantAway(t, "a raw commit", err)
			_, err = d.propose(a, room.ProposeInput{Target: "Risks", BaseVersion: 1, Summary: "risk",
				Change: room.ChangeInput{Section: "Risks", Content: refOf("## Risks\n\nmoving\n")}})
			wantAway(t, "a proposal", err)
			_, err = d.checkout(a, "Risks", nil)
			wantAway(t, "a checkout", err)
			// What does not need the file goes on: the time rules, an
			// invitation, and reads from the sidecar the room holds.
			must(t, d.r.Sweep(ctx))
			if _, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (room.InviteGrant, error) {
				return eng.CreateInvite(tx, room.Operator(eng.HostID), room.InviteInput{})
			}); err != nil {
				t.Fatalf("an invitation while the directory is away: %v", err)
			}
			got, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ReadResult, error) {
				return eng.Read(ctx, q, a, room.ReadInput{})
			})
			if err != nil || got.Version != 1 || got.Content != testDoc {
				t.Fatalf("a read while away: %+v, %v; want version 1 from the sidecar", got, err)
			}

			// An edit made where the directory is now is not recorded
			// while the path leads elsewhere, by a read or a sweep.
			edited := testDoc + "\nedited while away\n"
			must(t, os.WriteFile(filepath.Join(old, "idea.md"), []byte(edited), 0o644))
			if _, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ReadResult, error) {
				return eng.Read(ctx, q, a, room.ReadInput{})
			}); err != nil {
				t.Fatal(err)
			}
			must(t, d.r.Sweep(ctx))
			after := d.dump(`SELECT * FROM versions ORDER BY version`) + d.dump(`SELECT * FROM proposals ORDER BY proposal_id`)
			if after != before {
				t.Fatalf("versions or proposals changed while the directory was away:\n%s\nwant\n%s", after, before)
			}
			if got := listDir(t, dir); got != newPlace {
				t.Fatalf("the new place holds %q, want %q as it was put there: the room created a file in it", got, newPlace)
			}
			if got := listDir(t, elsewhere); got != "idea.md" {
				t.Fatalf("the other directory holds %q, want only idea.md", got)
			}
			if b, _ := os.ReadFile(filepath.Join(elsewhere, "idea.md")); string(b) != stranger {
				t.Fatalf("the other directory's idea.md was changed: %q", b)
			}
			if got := listDir(t, old); got != heldFiles {
				t.Fatalf("the held directory holds %q, was %q", got, heldFiles)
			}

			// Back: the next request notices, records the edit made
			// meanwhile, and the document works again.
			pl.undo(t, dir)
			must(t, os.Rename(old, dir))
			got, err = read(d.env, func(eng *room.Engine, q room.Querier) (room.ReadResult, error) {
				return eng.Read(ctx, q, a, room.ReadInput{})
			})
			if err != nil || got.Version != 2 || got.Content != edited {
				t.Fatalf("the first read after the return: %+v, %v; want version 2, the edit made while away", got, err)
			}
			if v := d.versionAt(2); v.Source != "external" {
				t.Fatalf("version 2 is %s, want external", v.Source)
			}
			// The proposal approved before the move is stale now (its
			// section changed); a new one commits into the file.
			if _, err := d.commitProposal(a, approved.ProposalID); room.ErrorKind(err) != room.KindStaleVersion {
				t.Fatalf("the old proposal: %v, want stale_version", err)
			}
			fresh := d.mustPropose(a, "Goals", "## Goals\n\nship it after the move\n")
			d.mustApprove(fresh.ProposalID)
			res, err := d.commitProposal(a, fresh.ProposalID)
			if err != nil || res.Version != 3 {
				t.Fatalf("a commit after the return: %+v, %v; want version 3", res, err)
			}
			if text := d.fileText(); !strings.Contains(text, "ship it after the move") || !strings.Contains(text, "edited while away") {
				t.Fatalf("the file after the commit: %q", text)
			}
			var sources []string
			for v := int64(1); v <= 3; v++ {
				sources = append(sources, d.versionAt(v).Source)
			}
			if got := strings.Join(sources, ","); got != "bootstrap,external,proposal" {
				t.Fatalf("history %s, want bootstrap,external,proposal", got)
			}
			if got := listDir(t, elsewhere); got != "idea.md" {
				t.Fatalf("the other directory holds %q at the end, want only idea.md", got)
			}
		})
	}
}

// TestStore_ConnectionsReachTheHeldSidecarWhereverItMoves: the read
// pool's connections, all opened at start, read the room's sidecar while
// its directory is away and again once it is back; a connection opened
// after the move (the checkpointer's) reaches the sidecar it opened at
// start; none creates a file where the directory was. (Before issue 25
// item 5, a read connection opened after a move made a new, empty sidecar
// by path.)
func TestStore_ConnectionsReachTheHeldSidecarWhereverItMoves(t *testing.T) {
	for _, pl := range placements {
		t.Run(pl.name+": every read connection reads the room's sidecar away and back, and nothing is created", func(t *testing.T) {
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
			opened := st.Reader.Stats().OpenConnections
			if opened != st.Reader.Stats().MaxOpenConnections || opened == 0 {
				t.Fatalf("the read pool holds %d of its %d connections at start, want all", opened, st.Reader.Stats().MaxOpenConnections)
			}
			// readAll holds every connection of the pool at once and reads
			// the writer's row on each.
			readAll := func(when string) {
				t.Helper()
				var conns []*sql.Conn
				for range opened {
					c, err := st.Reader.Conn(ctx)
					must(t, err)
					conns = append(conns, c)
				}
				for i, c := range conns {
					var v string
					if err := c.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'probe'`).Scan(&v); err != nil || v != "the room's sidecar" {
						t.Fatalf("%s, read connection %d: %q, %v; want the row the writer wrote to the room's sidecar", when, i, v, err)
					}
				}
				for _, c := range conns {
					c.Close()
				}
				if n := st.Reader.Stats().OpenConnections; n != opened {
					t.Fatalf("%s: the pool holds %d connections, want the %d it opened at start", when, n, opened)
				}
			}
			must(t, os.Rename(dir, dir+".old"))
			pl.put(t, dir, elsewhere)
			readAll("while the directory is away")
			pl.undo(t, dir)
			must(t, os.Rename(dir+".old", dir))
			readAll("once the directory is back")
			must(t, os.Rename(dir, dir+".old"))
			pl.put(t, dir, elsewhere)
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

// TestRemoveBeside_RemovesFromTheHeldDirectory: a room that stops after its
// directory moved removes its own credential file, not a namesake in a new
// directory at the old path.
func TestRemoveBeside_RemovesFromTheHeldDirectory(t *testing.T) {
	e := newEnv(t, withDocInDir())
	dir := filepath.Dir(e.doc)
	const suffix = ".commonroom.owner"
	must(t, os.WriteFile(e.doc+suffix, []byte("ours"), 0o600))
	must(t, os.Rename(dir, dir+".old"))
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(e.doc+suffix, []byte("another room's"), 0o600))
	must(t, e.eng.RemoveBeside(suffix))
	if _, err := os.Stat(filepath.Join(dir+".old", "idea.md"+suffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the room's own file is still there: %v", err)
	}
	if b, err := os.ReadFile(e.doc + suffix); err != nil || string(b) != "another room's" {
		t.Fatalf("the namesake at the old path: %q, %v; want it untouched", b, err)
	}
}
