package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/commonroom/ce/room"
	_ "modernc.org/sqlite"
)

// backupOut is `ce backup --json`.
type backupOut struct {
	WorkspaceID string `json:"workspace_id"`
	Version     int64  `json:"version"`
	Dir         string `json:"dir"`
	DirCreated  bool   `json:"dir_created"`
	Document    struct {
		Path   string `json:"path"`
		Bytes  int64  `json:"bytes"`
		Mode   string `json:"mode"`
		SHA256 string `json:"sha256"`
	} `json:"document"`
	Sidecar struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
		Mode  string `json:"mode"`
	} `json:"sidecar"`
	Serving             bool `json:"serving"`
	LiveDocumentMatches bool `json:"live_document_matches"`
}

var backupKeys = []string{"workspace_id", "version", "dir", "dir_created", "document", "sidecar", "serving", "live_document_matches"}

// backupRO opens a backup's sidecar read-only and query-only: the checks
// never change what they check.
func backupRO(t testing.TB, path string) *sql.DB {
	t.Helper()
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String()+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkBackup verifies one backup from the outside: both files where the
// JSON says, the document with docMode and the sidecar with dbMode; the sidecar passes integrity_check;
// the version reported is the copy's newest; the document file holds
// exactly that version's text; the workspace is the original's.
func checkBackup(t *testing.T, b backupOut, workspaceID, docMode, dbMode string) {
	t.Helper()
	if b.WorkspaceID != workspaceID {
		t.Errorf("workspace_id %q, want the room's %q", b.WorkspaceID, workspaceID)
	}
	for _, f := range []struct{ path, mode, want string }{{b.Document.Path, b.Document.Mode, docMode}, {b.Sidecar.Path, b.Sidecar.Mode, dbMode}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatalf("the backup names %s: %v", f.path, err)
		}
		if got := fmt.Sprintf("%04o", st.Mode().Perm()); got != f.want || f.mode != f.want {
			t.Errorf("%s: mode %s (reported %s), want %s", f.path, got, f.mode, f.want)
		}
	}
	for _, p := range []string{"-wal", "-shm", "-journal"} {
		if exists(b.Sidecar.Path + p) {
			t.Errorf("the backup left %s beside the copy", b.Sidecar.Path+p)
		}
	}
	db := backupRO(t, b.Sidecar.Path)
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
	var newest int64
	if err := db.QueryRow("SELECT max(version) FROM versions").Scan(&newest); err != nil {
		t.Fatal(err)
	}
	content, err := room.VersionText(context.Background(), db, newest)
	if err != nil {
		t.Fatal(err)
	}
	if newest != b.Version {
		t.Errorf("reported version %d, the copy's newest is %d", b.Version, newest)
	}
	doc, err := os.ReadFile(b.Document.Path)
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != content {
		t.Errorf("the document copy is not version %d's text:\n got %q\nwant %q", b.Version, doc, content)
	}
	if int64(len(doc)) != b.Document.Bytes {
		t.Errorf("document bytes %d reported, %d written", b.Document.Bytes, len(doc))
	}
	var id string
	if err := db.QueryRow("SELECT value FROM meta WHERE key = 'workspace_id'").Scan(&id); err != nil || id != workspaceID {
		t.Errorf("the copy's workspace_id is %q (%v), want %q", id, err, workspaceID)
	}
}

// serveBackup serves a backup and checks that it is the same room: the
// same workspace id, the old session token admitted, the version the
// backup reported (the document matched it, so opening recorded nothing).
func serveBackup(t *testing.T, b backupOut, workspaceID, token string) {
	t.Helper()
	s := startServe(t, b.Dir, "serve", b.Document.Path, "--json")
	if s.Banner.WorkspaceID != workspaceID {
		t.Errorf("the backup serves workspace %q, want %q", s.Banner.WorkspaceID, workspaceID)
	}
	code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", token, nil)
	if code != 200 {
		t.Fatalf("an existing session token on the served backup: %d %s", code, body)
	}
	var st struct {
		Version     int64  `json:"version"`
		WorkspaceID string `json:"workspace_id"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != b.Version {
		t.Errorf("the served backup is at version %d, the backup reported %d", st.Version, b.Version)
	}
	if code := s.stop(os.Interrupt); code != 0 {
		t.Errorf("the served backup exited %d", code)
	}
}

func runBackup(t *testing.T, dir, file, dst string) backupOut {
	t.Helper()
	r := mustCE(t, dir, nil, "backup", "--workspace", file, "--json", dst)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "ce backup --json", raw, backupKeys...)
	var b backupOut
	decodeJSON(t, r, &b)
	return b
}

// TestBackupWhileServing takes backups of a room that is committing
// document versions and creating handoffs as fast as it can, and checks
// each one on its own terms, then serves one.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n\nrev 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json", "--rate-limit", "0")
	owner := join(t, dir, s.Banner.Invite, "owner")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--capabilities", "read,admin"), &inv)
	admin := join(t, dir, inv.URI, "editor")

	// The load: raw commits of new text (each a version), and handoffs
	// created and cancelled, until the backups are done.
	stop := make(chan struct{})
	var commits atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", admin.SessionToken, nil)
			var st struct {
				Version int64 `json:"version"`
			}
			if code != 200 || json.Unmarshal(body, &st) != nil {
				t.Errorf("status under load: %d %s", code, body)
				return
			}
			code, body = httpDo(t, "POST", s.Banner.IngressURL+"/workspace/commit", admin.SessionToken, map[string]any{
				"base_version": st.Version, "summary": "load", "content": fmt.Sprintf("# Notes\n\nrev %d\n", n)})
			switch {
			case code == 200:
				commits.Add(1)
			case code != 409: // stale_version when a handoff's sync raced: fine
				t.Errorf("commit under load: %d %s", code, body)
				return
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", owner.SessionToken, map[string]any{"summary": "load"})
			if code != 200 {
				t.Errorf("create under load: %d %s", code, body)
				return
			}
			var c struct {
				Handoff struct {
					TaskID string `json:"task_id"`
				} `json:"handoff"`
			}
			json.Unmarshal(body, &c)
			if code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/task/cancel", owner.SessionToken,
				map[string]any{"task_id": c.Handoff.TaskID}); code != 200 {
				t.Errorf("cancel under load: %d %s", code, body)
				return
			}
		}
	})

	var backups []backupOut
	for i := range 3 {
		b := runBackup(t, dir, "notes.md", filepath.Join(dir, fmt.Sprintf("backup-%d", i)))
		if !b.DirCreated || !b.Serving {
			t.Errorf("backup %d: dir_created %v, serving %v; want both true", i, b.DirCreated, b.Serving)
		}
		backups = append(backups, b)
	}
	close(stop)
	wg.Wait()
	if commits.Load() == 0 {
		t.Fatal("the load committed nothing: the backups were not taken under a write load")
	}
	for i, b := range backups {
		t.Run(fmt.Sprintf("backup_%d_is_consistent", i), func(t *testing.T) { checkBackup(t, b, s.Banner.WorkspaceID, "0600", "0600") })
	}
	if backups[0].Version == backups[2].Version {
		t.Errorf("three backups under load all at version %d: the load did not move the room", backups[0].Version)
	}
	serveBackup(t, backups[2], s.Banner.WorkspaceID, owner.SessionToken)
	// The live room never noticed.
	if code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", owner.SessionToken, nil); code != 200 {
		t.Errorf("the live room after the backups: %d %s", code, body)
	}
}

// TestBackupWhenNotServing backs up a room stopped gracefully and one killed
// with SIGKILL (its WAL not checkpointed): both copies are whole and serve.
func TestBackupWhenNotServing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill bool
	}{{"after_a_graceful_stop", false}, {"after_SIGKILL", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n\nhello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, "serve", "notes.md", "--json")
			g := join(t, dir, s.Banner.Invite, "owner")
			if code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", g.SessionToken, map[string]any{"summary": "kept"}); code != 200 {
				t.Fatalf("create: %d %s", code, body)
			}
			if tc.kill {
				s.kill9()
				if !exists(sidecarOf(file) + "-wal") {
					t.Fatal("no WAL after SIGKILL: the test does not test a backup of an uncheckpointed room")
				}
			} else if code := s.stop(os.Interrupt); code != 0 {
				t.Fatalf("stop: exit %d", code)
			}
			existing := filepath.Join(dir, "backups")
			if err := os.Mkdir(existing, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(existing, "README"), []byte("other files may live here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			b := runBackup(t, dir, "notes.md", existing)
			if b.DirCreated || b.Serving || !b.LiveDocumentMatches {
				t.Errorf("dir_created %v, serving %v, live_document_matches %v; want false, false, true", b.DirCreated, b.Serving, b.LiveDocumentMatches)
			}
			// A 0644 document: its copy is 0644, the sidecar's owner-only.
			checkBackup(t, b, s.Banner.WorkspaceID, "0644", "0600")
			db := backupRO(t, b.Sidecar.Path)
			var n int
			if err := db.QueryRow("SELECT count(*) FROM handoffs WHERE summary = 'kept'").Scan(&n); err != nil || n != 1 {
				t.Errorf("the acknowledged handoff is not in the backup (%d, %v)", n, err)
			}
			serveBackup(t, b, s.Banner.WorkspaceID, g.SessionToken)
		})
	}
}

// TestBackupRefusesBadInput: every refusal has a clear message and exit
// code, and leaves the target as it was (no directory created, nothing
// overwritten).
func TestBackupRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json")
	if code := s.stop(os.Interrupt); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "never-served.md"), []byte("# Alone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "foreign.md"), []byte("# Foreign\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "foreign.md.commonroom.db"), []byte("not a database at all, but long enough to look like one........"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	holding := func(name string) string {
		d := filepath.Join(dir, "holds-"+name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		name      string
		args      []string
		code      int
		mustStay  string // a path that must still hold exactly "precious\n" (or "x")
		mustNotBe string // a path that must not exist afterwards
	}{
		{"a_missing_workspace_is_not_found", []string{"--workspace", "nosuch.md", filepath.Join(dir, "b1")}, exitNotFound, "", filepath.Join(dir, "b1")},
		{"a_file_never_served_has_no_room", []string{"--workspace", "never-served.md", filepath.Join(dir, "b2")}, exitNotFound, "", filepath.Join(dir, "b2")},
		{"a_foreign_sidecar_is_refused", []string{"--workspace", "foreign.md", filepath.Join(dir, "b3")}, exitUsage, "", filepath.Join(dir, "b3")},
		{"DIR_is_a_file", []string{"--workspace", "notes.md", aFile}, exitUsage, aFile, ""},
		{"DIR_holds_the_document", []string{"--workspace", "notes.md", holding("notes.md")}, exitUsage,
			filepath.Join(dir, "holds-notes.md", "notes.md"), filepath.Join(dir, "holds-notes.md", "notes.md.commonroom.db")},
		{"DIR_holds_the_sidecar", []string{"--workspace", "notes.md", holding("notes.md.commonroom.db")}, exitUsage,
			filepath.Join(dir, "holds-notes.md.commonroom.db", "notes.md.commonroom.db"), filepath.Join(dir, "holds-notes.md.commonroom.db", "notes.md")},
		{"DIR_holds_a_stale_WAL", []string{"--workspace", "notes.md", holding("notes.md.commonroom.db-wal")}, exitUsage,
			filepath.Join(dir, "holds-notes.md.commonroom.db-wal", "notes.md.commonroom.db-wal"), filepath.Join(dir, "holds-notes.md.commonroom.db-wal", "notes.md")},
		{"DIR_parent_is_missing", []string{"--workspace", "notes.md", filepath.Join(dir, "no", "such", "dir")}, exitUsage, "", filepath.Join(dir, "no")},
		{"no_DIR", []string{"--workspace", "notes.md"}, exitUsage, "", ""},
		{"two_DIRs", []string{"--workspace", "notes.md", filepath.Join(dir, "b4"), filepath.Join(dir, "b5")}, exitUsage, "", filepath.Join(dir, "b4")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before []byte
			if c.mustStay != "" {
				before, _ = os.ReadFile(c.mustStay)
			}
			r := ce(t, dir, nil, append([]string{"backup"}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, c.code, r.output())
			}
			if r.stderr == "" || r.stdout != "" {
				t.Errorf("want a message on stderr and nothing on stdout; got stdout %q stderr %q", r.stdout, r.stderr)
			}
			if c.mustStay != "" {
				if after, err := os.ReadFile(c.mustStay); err != nil || string(after) != string(before) {
					t.Errorf("%s changed: %q → %q (%v)", c.mustStay, before, after, err)
				}
			}
			if c.mustNotBe != "" && exists(c.mustNotBe) {
				t.Errorf("%s exists after a refused backup", c.mustNotBe)
			}
		})
	}
	// No temporary file is left behind by any refusal.
	matches, _ := filepath.Glob(filepath.Join(dir, "*", ".*backup-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}
