package cli

// The permissions of the files `ce serve` puts beside the document (issue
// 13 item 4), with the real binary.

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// operatorCommit makes a raw commit as the local operator (the credential
// beside the file), so the sidecar's WAL and shared-memory files exist.
func operatorCommit(t *testing.T, file, content string) {
	t.Helper()
	b, err := os.ReadFile(ownerOf(file))
	if err != nil {
		t.Fatal(err)
	}
	var of struct {
		OwnerURL string `json:"owner_url"`
		Token    string `json:"operator_token"`
	}
	if err := json.Unmarshal(b, &of); err != nil {
		t.Fatal(err)
	}
	code, body := httpDo(t, "POST", of.OwnerURL+"/workspace/commit", of.Token,
		map[string]any{"base_version": 1, "summary": "perm test", "content": content})
	if code != http.StatusOK {
		t.Fatalf("commit: %d %s", code, body)
	}
}

func permOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestServeSidecarPermissions: the sidecar, its -wal and -shm get the
// document's read/write bits but never more than 0600 (they hold the text,
// its history and what only participants see); the lock gets the
// document's read/write bits (it says only who serves it); the operator
// credential is 0600 whatever the document's mode; a sidecar left wider
// than that is narrowed at open, with a log line.
func TestServeSidecarPermissions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		docMode  fs.FileMode
		want     fs.FileMode // the sidecar, -wal and -shm
		wantLock fs.FileMode
	}{
		{"a_0600_document_gives_0600", 0o600, 0o600, 0o600},
		{"a_0640_document_gives_an_owner_only_sidecar_and_a_0640_lock", 0o640, 0o600, 0o640},
		{"a_0644_document_gives_an_owner_only_sidecar_and_a_0644_lock", 0o644, 0o600, 0o644},
		{"an_executable_0750_document_gives_0600_and_a_0640_lock", 0o750, 0o600, 0o640},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(file, c.docMode); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, "serve", file, "--json")
			operatorCommit(t, file, "# Notes\n\ncommitted\n")
			db := sidecarOf(file)
			for _, p := range []string{db, db + "-wal", db + "-shm"} {
				if got := permOf(t, p); got != c.want {
					t.Errorf("%s: mode %o, want %o", filepath.Base(p), got, c.want)
				}
			}
			if got := permOf(t, file+".commonroom.lock"); got != c.wantLock {
				t.Errorf("lock: mode %o, want %o", got, c.wantLock)
			}
			if got := permOf(t, ownerOf(file)); got != 0o600 {
				t.Errorf("operator credential: mode %o, want 600", got)
			}
			if got := permOf(t, file); got != c.docMode {
				t.Errorf("the document's mode changed to %o", got)
			}
			if code := s.stop(syscall.SIGTERM); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
	t.Run("a_wider_sidecar_is_narrowed_at_open", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "notes.md")
		if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "serve", file, "--json")
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d", code)
		}
		db := sidecarOf(file)
		// As a room served before this fix left them: all world-readable.
		for _, p := range []string{db, db + "-wal", db + "-shm", file + ".commonroom.lock"} {
			if !exists(p) { // an empty WAL or shm is valid: no frames yet
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(file, 0o600); err != nil {
			t.Fatal(err)
		}
		s = startServe(t, dir, "serve", file, "--json")
		for _, p := range []string{db, db + "-wal", db + "-shm", file + ".commonroom.lock"} {
			if got := permOf(t, p); got != 0o600 {
				t.Errorf("%s: mode %o after open, want 600", filepath.Base(p), got)
			}
		}
		if !strings.Contains(s.stderr.String(), "narrowed") {
			t.Errorf("no log line about narrowing:\n%s", s.stderr.String())
		}
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("the_files_get_the_documents_group", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("giving a file another group needs root or membership")
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "notes.md")
		if err := os.WriteFile(file, []byte("# Notes\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(file, 0, 12345); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "serve", file, "--json")
		operatorCommit(t, file, "# Notes\n\ngrouped\n")
		db := sidecarOf(file)
		for _, p := range []string{db, db + "-wal", db + "-shm", file + ".commonroom.lock"} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			want := fs.FileMode(0o600)
			if strings.HasSuffix(p, ".lock") {
				want = 0o640
			}
			if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 12345 || st.Mode().Perm() != want {
				t.Errorf("%s: gid %d mode %o, want 12345 %o", filepath.Base(p), gid, st.Mode().Perm(), want)
			}
		}
		if st, err := os.Stat(file); err != nil || st.Sys().(*syscall.Stat_t).Gid != 12345 {
			t.Errorf("the document lost its group after a commit: %v", err)
		}
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("a_sidecar_that_is_not_ours_is_refused_with_its_mode_untouched", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "notes.md")
		if err := os.WriteFile(file, []byte("# Notes\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		const junk = "this is not a SQLite database, and not ours to change"
		if err := os.WriteFile(sidecarOf(file), []byte(junk), 0o644); err != nil {
			t.Fatal(err)
		}
		r := ce(t, dir, nil, "serve", file, "--json")
		if r.code == 0 {
			t.Fatalf("served beside a foreign sidecar:\n%s", r.output())
		}
		b, err := os.ReadFile(sidecarOf(file))
		if err != nil || string(b) != junk || permOf(t, sidecarOf(file)) != 0o644 {
			t.Errorf("the foreign sidecar changed: %q, mode %o, %v", b, permOf(t, sidecarOf(file)), err)
		}
	})
	t.Run("ephemeral_still_serves", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "notes.md")
		if err := os.WriteFile(file, []byte("# Notes\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "serve", file, "--ephemeral", "--json")
		operatorCommit(t, file, "# Notes\n\nephemeral\n")
		if exists(sidecarOf(file)) {
			t.Error("--ephemeral put the sidecar beside the file")
		}
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
}
