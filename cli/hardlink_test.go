package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeWarnsAboutHardLinks: a commit replaces the file, so another hard
// link keeps the old text; ce serve says so in its banner and its log.
func TestServeWarnsAboutHardLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, filepath.Join(dir, "copy.md")); err != nil {
		t.Fatal(err)
	}
	t.Run("the_log_says_so", func(t *testing.T) {
		s := startServe(t, dir, "serve", file, "--json")
		if !strings.Contains(s.stderr.String(), "hard links") {
			t.Errorf("no warning in the log:\n%s", s.stderr.String())
		}
		s.stop(syscall.SIGTERM)
	})
	t.Run("the_banner_says_so", func(t *testing.T) {
		s := spawnServe(t, dir, nil, "serve", file)
		if out := s.bannerText(); !strings.Contains(out, "Warning:") || !strings.Contains(out, "has 2 hard links") {
			t.Errorf("no warning in the banner:\n%s", s.stdout.String())
		}
		s.stop(syscall.SIGTERM)
	})
}
