package httpapi

// A commit after the document's name stopped holding a regular file (issue
// 25 item 7): the room writes only the regular file it resolved at start,
// and used to answer a bare 500 internal when a symlink (or a FIFO) took
// its place. It now answers unavailable with a message that says what is
// there and what to do, writes nothing, keeps the proposal approved, and
// commits once the file is back.

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCommitAfterTheDocumentWasReplaced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, doc string) // put something that is not a regular file at doc
		says    string                         // what the message must name
	}{
		{"a_symlink_in_its_place_is_refused_as_unavailable", func(t *testing.T, doc string) {
			other := filepath.Join(filepath.Dir(doc), "other.md")
			if err := os.WriteFile(other, []byte("# Other\n\nnot the room's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("other.md", doc); err != nil {
				t.Fatal(err)
			}
		}, "idea.md is now a symbolic link"},
		{"a_fifo_in_its_place_is_refused_as_unavailable", func(t *testing.T, doc string) {
			if err := syscall.Mkfifo(doc, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "idea.md is now a named pipe (FIFO)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			author := h.join("author", agentCaps...)
			reviewer := h.join("reviewer", "read", "approve")
			base := h.newestVersion(t)
			want := "# Idea\n\ncommitted once the file is back\n"
			pid := h.approved(t, author.SessionToken, reviewer.SessionToken, base, "", want)
			moved := h.Doc + ".moved"
			if err := os.Rename(h.Doc, moved); err != nil {
				t.Fatal(err)
			}
			tc.replace(t, h.Doc)
			other, _ := os.ReadFile(filepath.Join(h.Dir, "other.md"))

			check := func(t *testing.T, msg string) {
				t.Helper()
				for _, s := range []string{tc.says, "nothing was written", "Put the regular file back at idea.md"} {
					if !strings.Contains(msg, s) {
						t.Errorf("the message does not say %q: %s", s, msg)
					}
				}
				if strings.Contains(msg, h.Dir) {
					t.Errorf("the message names the room's directory to a participant: %s", msg)
				}
			}
			t.Run("HTTP_answers_503_unavailable_with_a_message", func(t *testing.T) {
				m := wantError(t, h.commit(t, author.SessionToken, pid), http.StatusServiceUnavailable, "unavailable")
				check(t, str(m["message"]))
			})
			t.Run("MCP_answers_an_error_with_the_same_message", func(t *testing.T) {
				r := author.mcp.call(t, "tools/call", map[string]any{"name": "workspace_commit", "arguments": map[string]any{"proposal_id": pid}})
				e := wantRPCError(t, r, http.StatusServiceUnavailable, -32603)
				check(t, str(e["message"]))
			})
			t.Run("nothing_was_written_and_the_proposal_stays_approved", func(t *testing.T) {
				if v := h.newestVersion(t); v != base {
					t.Errorf("version %d after the refusal, want %d", v, base)
				}
				p := okJSON(t, h.get(t, author.SessionToken, "/workspace/proposal?proposal_id="+pid))
				if p["status"] != "approved" {
					t.Errorf("proposal %v, want approved", p["status"])
				}
				if got, _ := os.ReadFile(filepath.Join(h.Dir, "other.md")); string(got) != string(other) {
					t.Errorf("the link's target changed: %q", got)
				}
				if st, err := os.Lstat(h.Doc); err != nil || st.Mode().IsRegular() {
					t.Errorf("what was put in the document's place changed: %v %v", st, err)
				}
				if m, _ := filepath.Glob(filepath.Join(h.Dir, ".idea.md.*.tmp")); len(m) > 0 {
					t.Errorf("left temporary files: %v", m)
				}
			})
			t.Run("with_the_file_back_the_same_commit_goes_through", func(t *testing.T) {
				if err := os.Remove(h.Doc); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(moved, h.Doc); err != nil {
					t.Fatal(err)
				}
				okJSON(t, h.commit(t, author.SessionToken, pid))
				if got := h.fileText(t); got != want {
					t.Errorf("the file holds %q, want %q", got, want)
				}
			})
		})
	}
}
