package cli

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// sidecarSQL runs statements on the sidecar of file in dir with a
// connection of the test's own (the room, if one serves, keeps working
// beside it: SQLite locks, ce's lock file is only between ce processes).
func sidecarSQL(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// withFreePages leaves about 600 free pages (under the room's 1,024 that
// start its idle steps) spread over the sidecar at path.
var withFreePages = []string{
	`CREATE TABLE filler(id INTEGER PRIMARY KEY, b BLOB)`,
	`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < 800) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`,
	`DELETE FROM filler WHERE id % 2 = 0 OR id < 400`,
	`PRAGMA wal_checkpoint(TRUNCATE)`,
}

// makeOldSidecar rewrites a stopped room's sidecar as a ce before issue 26
// left it: auto_vacuum NONE.
var makeOldSidecar = []string{`PRAGMA auto_vacuum = NONE`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`}

func autoVacuumOf(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode int
	if err := db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// TestServeConvertsAnOldSidecarOnce: a sidecar an older ce wrote
// (auto_vacuum NONE) is converted by ce serve before the room serves, with
// a line before (its size) and one after (how long it took and the new
// size); the room then holds the same data, and the next start is silent.
func TestServeConvertsAnOldSidecarOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, dir, "serve", "notes.md", "--json")
	first.stop(syscall.SIGTERM)
	db := filepath.Join(dir, sidecarOf("notes.md"))
	sidecarSQL(t, db, withFreePages...)
	sidecarSQL(t, db, makeOldSidecar...)
	if autoVacuumOf(t, db) != 0 {
		t.Fatal("the sidecar was not made old")
	}

	for _, tc := range []struct {
		name     string
		converts bool
	}{
		{"an_old_sidecar_is_converted_and_timed", true},
		{"a_converted_sidecar_opens_silently", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServe(t, dir, "serve", "notes.md", "--json")
			if s.Banner.WorkspaceID != first.Banner.WorkspaceID {
				t.Errorf("workspace %s after the conversion, want %s", s.Banner.WorkspaceID, first.Banner.WorkspaceID)
			}
			s.stop(syscall.SIGTERM)
			logs := s.stderr.String()
			for _, line := range []string{`msg="converting the sidecar to incremental auto-vacuum`, `msg="converted the sidecar to incremental auto-vacuum"`} {
				if strings.Contains(logs, line) != tc.converts {
					t.Errorf("the log has %s: %v, want %v\n%s", line, !tc.converts, tc.converts, logs)
				}
			}
			if tc.converts {
				for _, field := range []string{"auto_vacuum=none", "took=", "bytes_before=", "bytes_after="} {
					if !strings.Contains(logs, field) {
						t.Errorf("the conversion's lines have no %s:\n%s", field, logs)
					}
				}
			}
			if autoVacuumOf(t, db) != 2 {
				t.Errorf("auto_vacuum %d after serving, want 2 (incremental)", autoVacuumOf(t, db))
			}
		})
	}
}

// compactOut is `ce compact --json`.
type compactOut struct {
	Sidecar      string     `json:"sidecar"`
	Serving      bool       `json:"serving"`
	Method       string     `json:"method"`
	Before       room.Space `json:"before"`
	After        room.Space `json:"after"`
	PagesFreed   int64      `json:"pages_freed"`
	Checkpointed bool       `json:"checkpointed"`
}

// TestCompact: ce compact gives the free pages back with one VACUUM when no
// room serves the file, and through the room (operator credential) when
// one does, the room answering throughout; both print the sizes before
// and after, as text and as JSON.
func TestCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json")
	s.stop(syscall.SIGTERM)
	db := filepath.Join(dir, sidecarOf("notes.md"))

	t.Run("offline_one_vacuum", func(t *testing.T) {
		sidecarSQL(t, db, withFreePages...)
		var out compactOut
		decodeJSON(t, mustCE(t, dir, nil, "compact", "--workspace", "notes.md", "--json"), &out)
		if out.Serving || out.Method != "vacuum" || !out.Checkpointed {
			t.Errorf("compact: %+v", out)
		}
		if out.Before.FreePages < 500 || out.After.FreePages != 0 || out.After.Bytes >= out.Before.Bytes-out.Before.FreePages*out.Before.PageSize/2 {
			t.Errorf("sizes: before %+v, after %+v", out.Before, out.After)
		}
		if fi, err := os.Stat(db); err != nil || fi.Size() != out.After.DBBytes {
			t.Errorf("the sidecar is %v bytes, the answer says %d", fi.Size(), out.After.DBBytes)
		}
		txt := mustCE(t, dir, nil, "compact", "--workspace", "notes.md")
		for _, want := range []string{"compacted ", "offline, one VACUUM", "before: ", "after:  ", "auto_vacuum incremental", "0 free"} {
			if !strings.Contains(txt.stdout, want) {
				t.Errorf("text output has no %q:\n%s", want, txt.stdout)
			}
		}
	})

	t.Run("online_through_the_room", func(t *testing.T) {
		s := startServe(t, dir, "serve", "notes.md", "--json")
		defer s.stop(syscall.SIGTERM)
		sidecarSQL(t, db, `DROP TABLE filler`)
		sidecarSQL(t, db, withFreePages...)
		var out compactOut
		decodeJSON(t, mustCE(t, dir, nil, "compact", "--workspace", "notes.md", "--json"), &out)
		if !out.Serving || out.Method != "incremental" || !out.Checkpointed {
			t.Errorf("compact: %+v", out)
		}
		if out.Before.FreePages < 500 || out.After.FreePages != 0 || out.PagesFreed < out.Before.FreePages ||
			out.After.Bytes >= out.Before.Bytes-out.Before.FreePages*out.Before.PageSize/2 {
			t.Errorf("sizes: before %+v, after %+v, %d pages freed", out.Before, out.After, out.PagesFreed)
		}
		wantHealthy(t, s.Banner.IngressURL)
		st := status(t, dir, "notes.md")
		if !st.Listener.Serving {
			t.Error("the room stopped serving")
		}
	})
}

// TestCompactRefusals: bad input gets a clear error and changes nothing.
func TestCompactRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("served.md", "# Served\n")
	write("never.md", "# Never served\n")
	write("foreign.md", "# Foreign\n")
	foreign := write(sidecarOf("foreign.md"), "this is not a database, and ce must leave it so")
	write("python.md", "# Python\n")
	python := filepath.Join(dir, sidecarOf("python.md"))
	sidecarSQL(t, python, `CREATE TABLE workspace(id TEXT)`) // someone else's SQLite file

	s := startServe(t, dir, "serve", "served.md", "--json")
	defer s.stop(syscall.SIGTERM)
	owner := filepath.Join(dir, ownerOf("served.md"))
	cred, err := os.ReadFile(owner)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (restore func())
		args  []string
		code  int
		want  string
	}{
		{name: "a_missing_file", args: []string{"--workspace", "nope.md"}, code: exitNotFound, want: "nope.md"},
		{name: "a_file_never_served", args: []string{"--workspace", "never.md"}, code: exitNotFound, want: "no room yet"},
		{name: "a_sidecar_that_is_not_a_database", args: []string{"--workspace", "foreign.md"}, code: exitUsage, want: "not a sidecar"},
		{name: "another_programs_sidecar", args: []string{"--workspace", "python.md"}, code: exitUsage, want: "another program"},
		{name: "an_argument", args: []string{"--workspace", "served.md", "extra"}, code: exitUsage, want: "no arguments"},
		{name: "a_serving_room_without_its_credential", args: []string{"--workspace", "served.md"}, code: exitBusy, want: "credential",
			setup: func(t *testing.T) func() {
				os.Remove(owner)
				return func() { os.WriteFile(owner, cred, 0o600) }
			}},
		{name: "a_serving_room_with_a_wrong_credential", args: []string{"--workspace", "served.md"}, code: exitAuth, want: "unauthorized",
			setup: func(t *testing.T) func() {
				os.WriteFile(owner, bytes.Replace(cred, []byte(`"operator_token":"op_`), []byte(`"operator_token":"op_x`), 1), 0o600)
				return func() { os.WriteFile(owner, cred, 0o600) }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				defer tc.setup(t)()
			}
			foreignBefore, _ := os.ReadFile(foreign)
			r := ce(t, dir, nil, append([]string{"compact"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("exit %d, want %d; stderr %q (want %q); stdout %q", r.code, tc.code, r.stderr, tc.want, r.stdout)
			}
			if after, _ := os.ReadFile(foreign); !bytes.Equal(after, foreignBefore) {
				t.Error("the foreign sidecar was changed")
			}
			if exists(filepath.Join(dir, sidecarOf("never.md"))) || exists(filepath.Join(dir, sidecarOf("nope.md"))) {
				t.Error("a refused compaction created a sidecar")
			}
		})
	}
	wantHealthy(t, s.Banner.IngressURL)
}
