package room_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestGuard_NotARegularFileInTheSwapWindow: something that is not a regular
// file put at the document's name between the commit's check and its swap
// (the file moved away first) is swapped back untouched, nothing is
// written, and the commit answers unavailable saying what is there, as it
// does when the same thing is there before the commit starts (issue 25
// item 7), not a bare internal error.
func TestGuard_NotARegularFileInTheSwapWindow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		put  func(t *testing.T, doc string)
		says string
		is   func(os.FileMode) bool
	}{
		{"a_symlink_is_refused_as_unavailable", func(t *testing.T, doc string) {
			must(t, os.Symlink(filepath.Base(doc)+".moved", doc))
		}, "is now a symbolic link", func(m os.FileMode) bool { return m&os.ModeSymlink != 0 }},
		{"a_directory_is_refused_as_unavailable", func(t *testing.T, doc string) {
			must(t, os.Mkdir(doc, 0o755))
		}, "is now a directory", os.FileMode.IsDir},
		{"a_fifo_is_refused_as_unavailable", func(t *testing.T, doc string) {
			must(t, syscall.Mkfifo(doc, 0o644))
		}, "is now a named pipe (FIFO)", func(m os.FileMode) bool { return m&os.ModeNamedPipe != 0 }},
	} {
		for _, fallback := range []bool{false, true} {
			name := c.name
			if fallback {
				name = "without_exchange_" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d := newDocRoom(t)
				if fallback {
					d.setNoExchange()
				}
				d.setSwapHook("swap", func() {
					must(t, os.Rename(d.doc, d.doc+".moved"))
					c.put(t, d.doc)
				})
				_, err := d.commit(d.op(), room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "raw", Content: refOf("# New\n")})
				wantKind(t, err, room.KindUnavailable)
				if msg := err.Error(); !strings.Contains(msg, c.says) || !strings.Contains(msg, "nothing was written") {
					t.Errorf("message %q does not say %q and that nothing was written", msg, c.says)
				}
				if st, lerr := os.Lstat(d.doc); lerr != nil || !c.is(st.Mode()) {
					t.Errorf("the document's name holds %v (%v), not what was put there", st.Mode(), lerr)
				}
				if b, _ := os.ReadFile(d.doc + ".moved"); string(b) != testDoc {
					t.Errorf("the moved file holds %q", b)
				}
				if d.version() != 1 {
					t.Errorf("version %d after the refusal", d.version())
				}
				noTempFiles(t, d.doc)
			})
		}
	}
}
