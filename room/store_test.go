package room

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTestStore(t *testing.T) *Store {
	t.Helper()
	st, err := OpenStore(context.Background(), filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestOpenStore_NewSidecarHasOurSettings(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	conn, err := st.Writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		pragma string
		want   any
	}{
		{"journal_mode", "wal"},
		{"synchronous", int64(2)}, // FULL
		{"foreign_keys", int64(1)},
		{"busy_timeout", int64(5000)},
		{"user_version", int64(SchemaVersion())},
		{"application_id", int64(applicationID)},
	} {
		t.Run(tc.pragma, func(t *testing.T) {
			var got any
			if err := conn.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA %s = %v (%T), want %v", tc.pragma, got, got, tc.want)
			}
		})
	}
	rows, err := st.Reader.Query(`SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name, ddl string
		if err := rows.Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(ddl, "STRICT") {
			t.Errorf("table %s is not STRICT", name)
		}
	}
	if n < 10 {
		t.Fatalf("found %d tables, want the whole schema", n)
	}
}

func TestOpenStore_ReaderCannotWrite(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Reader.Exec(`INSERT INTO meta(key, value) VALUES ('x', 'y')`); err == nil {
		t.Fatal("the read pool accepted a write")
	}
}

func TestOpenStore_RefusesWhatIsNotOurs(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    string
	}{
		{"python sidecar", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{
				`CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
				`CREATE TABLE versions (version INTEGER PRIMARY KEY, content TEXT NOT NULL)`,
				`INSERT INTO metadata VALUES ('workspace_id', 'workspace_0123456789abcdef')`,
			} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
		}, "another program"},
		{"not a database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not sqlite\n"), 500), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a SQLite database"},
		{"newer schema", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) STRICT`,
				`PRAGMA application_id = 1129465679`, `PRAGMA user_version = 99`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
		}, "newer ce"},
	}
	for _, tc := range cases {
		t.Run("refused untouched: "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "idea.md.commonroom.db")
			tc.prepare(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			entriesBefore, _ := os.ReadDir(dir)
			st, err := OpenStore(ctx, path, false)
			if err == nil {
				st.Close()
				t.Fatal("a sidecar that is not ours was opened")
			}
			if ErrorKind(err) != KindInvalidRequest || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want invalid_request mentioning %q", err, tc.want)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatal("the refused file was modified")
			}
			entriesAfter, _ := os.ReadDir(dir)
			if len(entriesAfter) != len(entriesBefore) {
				t.Fatalf("files beside the sidecar changed: %d -> %d", len(entriesBefore), len(entriesAfter))
			}
		})
	}
}

func TestOpenStore_DirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.commonroom.db")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(context.Background(), path, false); ErrorKind(err) != KindInvalidRequest {
		t.Fatalf("got %v, want invalid_request", err)
	}
}

func TestOpenStore_ReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	st, err := OpenStore(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Writer.Exec(`INSERT INTO meta(key, value) VALUES ('workspace_id', 'w1')`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenStore(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var v string
	if err := st.Reader.QueryRow(`SELECT value FROM meta WHERE key = 'workspace_id'`).Scan(&v); err != nil || v != "w1" {
		t.Fatalf("after reopen: %q, %v", v, err)
	}
}

func TestOpenStore_ReadOnlyNeverCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	if _, err := OpenStore(context.Background(), path, true); ErrorKind(err) != KindNotFound {
		t.Fatalf("got %v, want not_found", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a read-only open created the sidecar")
	}
}

// TestSchema_ChecksRejectIllegalStates proves the CHECK constraints are the
// last line of defence: each insert below describes a state the engine must
// never produce, and SQLite refuses it.
func TestSchema_ChecksRejectIllegalStates(t *testing.T) {
	st := openTestStore(t)
	db := st.Writer
	setup := []string{
		`INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at) VALUES ('p1','agent','a','[]',1,1)`,
		`INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at) VALUES ('p2','agent','b','[]',1,1)`,
		`INSERT INTO handoffs(handoff_id, owner_id, status, summary, task_id, created_at, updated_at) VALUES ('h1','p1','open','s','t1',1,1)`,
		`INSERT INTO versions(version, content_sha256, summary, source, created_at) VALUES (1, '', 'x', 'bootstrap', 1)`,
	}
	for _, q := range setup {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	illegal := []struct{ name, why, sql string }{
		{"participant kind", "CHECK", `INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at) VALUES ('p9','robot','a','[]',1,1)`},
		{"participant capabilities not an array", "CHECK", `INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at) VALUES ('p9','agent','a','{}',1,1)`},
		{"strict type", "cannot store", `INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at) VALUES ('p9','agent','a','[]','soon',1)`},
		{"open handoff with assignee", "CHECK", `INSERT INTO handoffs(handoff_id, owner_id, assignee_id, status, summary, task_id, created_at, updated_at) VALUES ('h2','p1','p2','open','s','t2',1,1)`},
		{"accepted handoff without assignee", "CHECK", `INSERT INTO handoffs(handoff_id, owner_id, status, summary, task_id, created_at, updated_at) VALUES ('h2','p1','accepted','s','t2',1,1)`},
		{"owner is assignee", "CHECK", `INSERT INTO handoffs(handoff_id, owner_id, assignee_id, status, summary, task_id, created_at, updated_at) VALUES ('h2','p1','p1','accepted','s','t2',1,1)`},
		{"result_ready without result", "CHECK", `INSERT INTO handoffs(handoff_id, owner_id, assignee_id, status, summary, task_id, created_at, updated_at) VALUES ('h2','p1','p2','result_ready','s','t2',1,1)`},
		{"unknown handoff status", "CHECK", `INSERT INTO handoffs(handoff_id, owner_id, status, summary, task_id, created_at, updated_at) VALUES ('h2','p1','done','s','t2',1,1)`},
		{"task status not MCP", "CHECK", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, created_at, last_updated_at) VALUES ('t1','p1','h1','accepted',1,1)`},
		{"completed task without result", "CHECK", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, created_at, last_updated_at) VALUES ('t1','p1','h1','completed',1,1)`},
		{"failed task without error", "CHECK", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, created_at, last_updated_at) VALUES ('t1','p1','h1','failed',1,1)`},
		{"working task with result", "CHECK", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, result_json, created_at, last_updated_at) VALUES ('t1','p1','h1','working','{}',1,1)`},
		{"task ttl zero", "CHECK", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, ttl_ms, created_at, last_updated_at) VALUES ('t1','p1','h1','working',0,1,1)`},
		{"task for no handoff", "FOREIGN KEY", `INSERT INTO tasks(task_id, owner_id, correlation_id, status, created_at, last_updated_at) VALUES ('t1','p1','h404','working',1,1)`},
		{"session token not a hash", "CHECK", `INSERT INTO sessions(session_ref, token_sha256, participant_id, capabilities, transport, issued_at, expires_at, last_seen_at) VALUES ('s1', x'00', 'p1', '[]', 'x', 1, 2, 1)`},
		{"session ended without reason", "CHECK", `INSERT INTO sessions(session_ref, token_sha256, participant_id, capabilities, transport, issued_at, expires_at, last_seen_at, ended_at) VALUES ('s1', zeroblob(32), 'p1', '[]', 'x', 1, 2, 1, 2)`},
		{"invite over its uses", "CHECK", `INSERT INTO invites(invite_id, secret_sha256, capabilities, created_at, expires_at, max_uses, used_count) VALUES ('i1', zeroblob(32), '[]', 1, 2, 1, 2)`},
		{"two live leases on one target", "UNIQUE", `INSERT INTO leases(lease_id, participant_id, target, requested_target, acquired_at, expires_at) VALUES ('l1','p1','Goals','Goals',1,2), ('l2','p2','Goals','Goals',1,2)`},
		{"proposal committed without version", "CHECK", `INSERT INTO proposals(proposal_id, participant_id, target, base_version, summary, change_json, status, reviewed_by, created_at, updated_at) VALUES ('pr1','p1','t',1,'s','{}','committed','p2',1,1)`},
	}
	for _, tc := range illegal {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			_, err := db.Exec(tc.sql)
			if err == nil {
				t.Fatalf("the schema accepted an illegal state: %s", tc.sql)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("refused for the wrong reason: %v (want %s)", err, tc.why)
			}
		})
	}
}
