package cli

// The transport's state directory beside the document (issue 25 item 4),
// with the real binary and the exec test plugin: ce serve used to follow a
// symlink planted at FILE.commonroom.transport (or at its NAME
// subdirectory) and chmod and fill what it pointed to, and to adopt a
// directory another user made there.

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeTransportStateDirIsTheRooms: a symlink (at either level) or a
// directory another user owns is refused before the plugin or the sidecar
// is touched, with a message naming it and what to do, and the link's
// target keeps its mode and stays empty; a directory of the serving user's
// is used and narrowed to 0700.
func TestServeTransportStateDirIsTheRooms(t *testing.T) {
	t.Parallel()
	stateOf := func(file string) (parent, sub string) {
		parent = file + ".commonroom.transport"
		return parent, filepath.Join(parent, "exec-test")
	}
	mkdir := func(t *testing.T, d string, mode fs.FileMode) {
		t.Helper()
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		root     bool                                          // needs root (to give a directory away)
		plant    func(t *testing.T, dir, file string) []string // returns the paths that must stay as planted
		refused  string                                        // what the refusal says ("" = served)
		refusing func(file string) string                      // the path the refusal names
	}{
		{"a_symlinked_state_directory_is_refused_and_its_target_untouched", false, func(t *testing.T, dir, file string) []string {
			elsewhere := filepath.Join(dir, "elsewhere")
			mkdir(t, elsewhere, 0o755)
			parent, _ := stateOf(file)
			if err := os.Symlink(elsewhere, parent); err != nil {
				t.Fatal(err)
			}
			return []string{elsewhere}
		}, "is a symbolic link", func(f string) string { p, _ := stateOf(f); return p }},
		{"a_symlinked_plugin_directory_is_refused_and_its_target_untouched", false, func(t *testing.T, dir, file string) []string {
			elsewhere := filepath.Join(dir, "elsewhere")
			mkdir(t, elsewhere, 0o755)
			parent, sub := stateOf(file)
			mkdir(t, parent, 0o700)
			if err := os.Symlink(elsewhere, sub); err != nil {
				t.Fatal(err)
			}
			return []string{elsewhere}
		}, "is a symbolic link", func(f string) string { _, s := stateOf(f); return s }},
		{"another_users_state_directory_is_refused", true, func(t *testing.T, dir, file string) []string {
			parent, _ := stateOf(file)
			mkdir(t, parent, 0o755)
			if err := os.Chown(parent, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			return []string{parent}
		}, "is owned by uid 65534", func(f string) string { p, _ := stateOf(f); return p }},
		{"another_users_plugin_directory_is_refused", true, func(t *testing.T, dir, file string) []string {
			parent, sub := stateOf(file)
			mkdir(t, parent, 0o700)
			mkdir(t, sub, 0o755)
			if err := os.Chown(sub, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			return []string{sub}
		}, "is owned by uid 65534", func(f string) string { _, s := stateOf(f); return s }},
		{"the_serving_users_own_directories_are_used_and_narrowed", false, func(t *testing.T, dir, file string) []string {
			parent, sub := stateOf(file)
			mkdir(t, parent, 0o755)
			mkdir(t, sub, 0o755)
			return nil
		}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.root && os.Geteuid() != 0 {
				t.Skip("giving a directory to another user needs root (CI runs as root)")
			}
			pp := newPluginPath(t)
			dir := t.TempDir()
			file := newDoc(t, dir, "idea.md")
			kept := tc.plant(t, dir, file)
			type look struct {
				mode fs.FileMode
				uid  uint32
				n    int
			}
			lookAt := func(p string) look {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				ents, _ := os.ReadDir(p)
				return look{st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid, len(ents)}
			}
			before := map[string]look{}
			for _, p := range kept {
				before[p] = lookAt(p)
			}

			s := spawnServe(t, dir, pp.env, "serve", file, "--json", "--transport", "exec:test")
			if tc.refused == "" {
				if !s.servesOrExits() {
					t.Fatalf("refused the serving user's own directories:\n%s", s.stderr.String())
				}
				parent, sub := stateOf(file)
				for _, d := range []string{parent, sub} {
					if got := lookAt(d).mode; got != 0o700 {
						t.Errorf("%s: mode %o, want 700", d, got)
					}
				}
				if code := s.stop(syscall.SIGTERM); code != 0 {
					t.Errorf("exit %d", code)
				}
				return
			}
			unchanged := func() {
				t.Helper()
				for _, p := range kept {
					if got := lookAt(p); got != before[p] {
						t.Errorf("%s changed: %+v, was %+v", p, got, before[p])
					}
				}
			}
			if s.servesOrExits() {
				s.stop(syscall.SIGTERM)
				unchanged()
				t.Fatalf("served with a state directory it should refuse")
			}
			if code := s.wait(); code != exitBusy {
				t.Errorf("exit %d, want %d (transport_unavailable)", code, exitBusy)
			}
			msg := s.stderr.String()
			for _, want := range []string{tc.refusing(file), tc.refused, "its state directory"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, msg)
				}
			}
			unchanged()
			if exists(sidecarOf(file)) || exists(ownerOf(file)) {
				t.Error("a refused state directory left a sidecar or a credential")
			}
			if pids, _ := os.ReadDir(pp.pids); len(pids) > 0 {
				t.Errorf("the plugin was started: %d pid files", len(pids))
			}
		})
	}
}
