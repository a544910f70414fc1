package cli

// The room's own files are the room's (issue 25 item 4), with the real
// binary: `ce serve` run as root used to adopt a sidecar another user left
// beside the document — and with it that user's pre-made invitation.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// otherUID is the user the tests give the planted files to (nobody).
const otherUID = 65534

// ownerUID is a file's owner as Lstat sees it.
func ownerUID(t *testing.T, path string) uint32 {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Uid
}

// TestServeRefusesAnotherUsersSidecar: a sidecar, -wal or -shm owned by
// another user is refused at start with a message naming the file, its
// owner and what to do; nothing of the room is modified (the sidecar's
// bytes, the planted file's owner and mode), no credential is written, and
// the planted invitation is never honoured. A local write (ce invite, in
// process) is refused the same way. Given back to the serving user,
// the same sidecar serves again.
func TestServeRefusesAnotherUsersSidecar(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root (CI runs as root)")
	}
	for _, tc := range []struct {
		name  string
		which func(file string) string // the file another user owns
	}{
		{"another_users_sidecar_is_refused", func(f string) string { return sidecarOf(f) }},
		{"another_users_wal_is_refused", func(f string) string { return sidecarOf(f) + "-wal" }},
		{"another_users_shm_is_refused", func(f string) string { return sidecarOf(f) + "-shm" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := newDoc(t, dir, "notes.md")
			// The planted room: a sidecar holding an invitation its maker
			// kept (made in-process, no room serving).
			var planted inviteGrant
			decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--capabilities", "*", "--json"), &planted)
			target := tc.which(file)
			if !exists(target) {
				if err := os.WriteFile(target, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chown(target, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(sidecarOf(file))
			if err != nil {
				t.Fatal(err)
			}
			beforeMode := permOf(t, target)

			// A local write with no room serving opens the sidecar in-process:
			// refused the same way.
			if r := ce(t, dir, nil, "invite", "--workspace", file, "--json"); r.code != exitUsage || !strings.Contains(r.stderr, "owned by uid 65534") {
				t.Errorf("ce invite on another user's sidecar: exit %d\n%s", r.code, r.output())
			}

			s := spawnServe(t, dir, nil, "serve", file, "--json")
			if s.servesOrExits() {
				code, body := httpDo(t, "POST", s.Banner.IngressURL+"/session/join", "", map[string]any{"invite": planted.URI, "name": "planter"})
				t.Fatalf("ce serve adopted another user's %s (the planted invitation joins: %d %s)", filepath.Base(target), code, body)
			}
			if code := s.wait(); code != exitUsage {
				t.Errorf("exit %d, want %d (usage)", code, exitUsage)
			}
			msg := s.stderr.String()
			for _, want := range []string{target, "owned by uid 65534", "ce runs as uid 0", "chown 0 " + target, "--ephemeral"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, msg)
				}
			}
			if out := s.stdout.String(); out != "" {
				t.Errorf("printed a banner: %q", out)
			}
			after, err := os.ReadFile(sidecarOf(file))
			if err != nil || !bytes.Equal(after, before) {
				t.Errorf("the sidecar's bytes changed (%v)", err)
			}
			if uid := ownerUID(t, target); uid != otherUID || permOf(t, target) != beforeMode {
				t.Errorf("%s: uid %d mode %o, want it left as planted (%d, %o)", filepath.Base(target), uid, permOf(t, target), otherUID, beforeMode)
			}
			if exists(ownerOf(file)) {
				t.Error("wrote an operator credential beside a refused room")
			}

			// Given back to the serving user, the same files serve.
			if err := os.Chown(target, 0, 0); err != nil {
				t.Fatal(err)
			}
			s = startServe(t, dir, "serve", file, "--json")
			if code := s.stop(syscall.SIGTERM); code != 0 {
				t.Errorf("exit %d once the file was root's again", code)
			}
		})
	}
}
