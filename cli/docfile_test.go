package cli

// What `ce serve` and the other commands refuse to open (issue 13 item 5),
// with the real binary.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeRefusesWhatIsNotARegularFile: a FIFO used to hang `ce serve`
// (ignoring SIGTERM), /dev/null got a sidecar written into /dev, and a
// missing directory was created. Each is now refused at once, with a
// message naming what the path is, and nothing is created.
func TestServeRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		path  func(t *testing.T, dir string) string
		want  string
		clean []string // globs that must match nothing afterwards
	}{
		{"a_fifo_is_refused", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "pipe.md")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is a named pipe (FIFO)", []string{"pipe.md.commonroom.*"}},
		{"a_symlink_to_a_fifo_is_refused", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "pipe")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			l := filepath.Join(dir, "link.md")
			if err := os.Symlink("pipe", l); err != nil {
				t.Fatal(err)
			}
			return l
		}, "is a named pipe (FIFO)", []string{"pipe.commonroom.*", "link.md.commonroom.*"}},
		{"dev_null_is_refused", func(*testing.T, string) string { return os.DevNull },
			"is a character device", []string{"/dev/null.commonroom.*"}},
		{"a_missing_directory_is_refused_and_not_created", func(_ *testing.T, dir string) string {
			return filepath.Join(dir, "a", "b", "notes.md")
		}, "does not exist; ce creates a missing file, never its directory", []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := c.path(t, dir)
			r := ce(t, dir, nil, "serve", path, "--json")
			if r.code == 0 {
				t.Fatalf("ce serve %s succeeded:\n%s", path, r.output())
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, c.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty: %q", r.stdout)
			}
			for _, g := range c.clean {
				if !filepath.IsAbs(g) {
					g = filepath.Join(dir, g)
				}
				if m, _ := filepath.Glob(g); len(m) > 0 {
					t.Errorf("created %v", m)
				}
			}
		})
	}
	t.Run("other_commands_refuse_a_fifo_too", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		p := filepath.Join(dir, "pipe.md")
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"status", "--workspace", p, "--json"},
			{"invite", "--workspace", p, "--json"},
			{"open", "--workspace", p},
		} {
			r := ce(t, dir, nil, args...)
			if r.code == 0 || !strings.Contains(r.stderr, "is a named pipe (FIFO)") {
				t.Errorf("ce %v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "pipe.md.commonroom.*")); len(m) > 0 {
			t.Errorf("created %v", m)
		}
	})
}
