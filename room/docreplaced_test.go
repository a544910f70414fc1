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

// TestSync_NotARegularFileAtTheNameIsLookedAtOnce: while the document's
// name holds something that is not a regular file, a sync records nothing
// (the room reads only the regular file it serves) and remembers what the
// path shows, so reads stop asking the writer to sync on every request
// until the path changes again: putting the file back is synced at once.
func TestSync_NotARegularFileAtTheNameIsLookedAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		put  func(t *testing.T, doc string)
	}{
		{"a_symlink", func(t *testing.T, doc string) {
			other := filepath.Join(filepath.Dir(doc), "other.md")
			must(t, os.WriteFile(other, []byte("# Other\n"), 0o644))
			must(t, os.Symlink("other.md", doc))
		}},
		{"a_directory", func(t *testing.T, doc string) { must(t, os.Mkdir(doc, 0o755)) }},
		{"a_fifo", func(t *testing.T, doc string) { must(t, syscall.Mkfifo(doc, 0o644)) }},
	} {
		t.Run(c.name+"_is_synced_once", func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			must(t, os.Rename(d.doc, d.doc+".moved"))
			c.put(t, d.doc)
			if !d.eng.FileChanged() {
				t.Fatal("the change of the name went unseen")
			}
			d.sweep()
			if d.eng.FileChanged() {
				t.Fatal("after a sync, every read would still ask the writer to sync")
			}
			if d.version() != 1 {
				t.Fatalf("version %d: something was recorded", d.version())
			}
			must(t, os.RemoveAll(d.doc))
			saveOver(t, d.doc, testDoc+"back\n")
			if !d.eng.FileChanged() {
				t.Fatal("the file put back went unseen")
			}
			d.sweep()
			if v := d.versionAt(d.version()); v.Version != 2 || v.Content != testDoc+"back\n" {
				t.Fatalf("latest version %+v", v)
			}
		})
	}
}
