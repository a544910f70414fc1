package room_test

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestCommit_KeepsOwnerGroupAndMode: a commit replaces the file, and the new
// file gets the old one's owner, group and mode (a file owned by another
// user used to become the server's). The tests run as root, here and in CI.
func TestCommit_KeepsOwnerGroupAndMode(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another owner needs root")
	}
	d := newDocRoom(t)
	if err := os.Chown(d.doc, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.doc, 0o640); err != nil {
		t.Fatal(err)
	}
	d.rawCommit("# New\n")
	st, err := os.Stat(d.doc)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != 12345 || sys.Gid != 12345 || st.Mode().Perm() != 0o640 {
		t.Fatalf("after a commit: uid %d gid %d mode %o, want 12345 12345 640", sys.Uid, sys.Gid, st.Mode().Perm())
	}
	if d.fileText() != "# New\n" {
		t.Fatalf("file %q", d.fileText())
	}
}

// TestOwnerCheck is the decision ce serve takes at open: it refuses a file
// whose owner or group a commit could not keep, saying why and what to do.
func TestOwnerCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		uid, gid uint32
		euid     int
		groups   []int
		want     string // "" = served
	}{
		{"root_serves_anyones_file", 12345, 12345, 0, []int{0}, ""},
		{"the_owner_in_the_files_group_is_served", 1000, 1000, 1000, []int{1000}, ""},
		{"the_owner_with_the_group_among_supplementary_ones_is_served", 1000, 50, 1000, []int{1000, 50}, ""},
		{"another_users_file_is_refused", 1001, 1000, 1000, []int{1000}, "owned by uid 1001 and ce runs as uid 1000"},
		{"a_group_that_is_not_ours_is_refused", 1000, 77, 1000, []int{1000, 50}, "belongs to group 77, which is not one of yours"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := room.OwnerCheck("/x/notes.md", c.uid, c.gid, c.euid, c.groups)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantKind(t, err, room.KindInvalidRequest)
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, "/x/notes.md") || !strings.Contains(msg, "Run ce as") {
				t.Fatalf("message %q does not say %q, name the file and say what to do", msg, c.want)
			}
		})
	}
}

// TestSidecarOwnerCheck is the decision ce serve (and every command that
// opens the sidecar to write) takes before adopting a sidecar file: its
// own or root's, never another user's, saying which file, whose, and what
// to do.
func TestSidecarOwnerCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		uid  uint32
		euid int
		want string // "" = adopted
	}{
		{"its_own_sidecar_is_adopted", 1000, 1000, ""},
		{"roots_own_sidecar_is_adopted_by_root", 0, 0, ""},
		{"a_sidecar_root_made_is_adopted_by_a_user", 0, 1000, ""},
		{"another_users_sidecar_is_refused_to_root", 65534, 0, "owned by uid 65534, and ce runs as uid 0"},
		{"another_users_sidecar_is_refused_to_a_user", 1001, 1000, "owned by uid 1001, and ce runs as uid 1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := room.SidecarOwnerCheck("/x/notes.md.commonroom.db-wal", c.uid, c.euid)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantKind(t, err, room.KindInvalidRequest)
			msg := err.Error()
			for _, s := range []string{c.want, "/x/notes.md.commonroom.db-wal", "chown", "move it away"} {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
		})
	}
}
