package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sidecar restored without its Markdown file (from a backup or a
// Litestream replica) gets the file back from its newest version when the
// room is served; a file that is there, even an older one, is the user's
// and becomes a version like any edit made while the room was down.
func TestServeWritesAMissingDocumentBackFromItsSidecar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill bool   // stop with SIGKILL (WAL not checkpointed) instead of SIGINT
		old  string // "" removes the file; otherwise the file is replaced by this text
	}{
		{name: "a_missing_file_is_written_from_the_newest_version"},
		{name: "a_missing_file_after_SIGKILL_is_written_from_the_newest_version", kill: true},
		{name: "an_older_file_is_kept_and_recorded_as_an_outside_edit", old: "# Notes\n\nold\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n\nfirst\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, "serve", "notes.md", "--json")
			var inv inviteGrant
			decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--capabilities", "read,admin"), &inv)
			g := join(t, dir, inv.URI, "editor")
			const latest = "# Notes\n\nlatest\n"
			code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/commit", g.SessionToken,
				map[string]any{"base_version": 1, "summary": "latest", "content": latest})
			if code != 200 {
				t.Fatalf("commit: %d %s", code, body)
			}
			if tc.kill {
				s.kill9()
			} else if code := s.stop(os.Interrupt); code != 0 {
				t.Fatalf("stop: exit %d", code)
			}
			wantFile, wantVersion, wantMode := latest, int64(2), os.FileMode(0o600)
			if tc.old == "" {
				// The file comes back with the sidecar's permission bits.
				sc, err := os.Stat(sidecarOf(file))
				if err != nil {
					t.Fatal(err)
				}
				wantMode = sc.Mode().Perm() & 0o666
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.WriteFile(file, []byte(tc.old), 0o600); err != nil {
					t.Fatal(err)
				}
				wantFile, wantVersion = tc.old, 3
			}

			s2 := startServe(t, dir, "serve", "notes.md", "--json")
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("the document after serving: %v", err)
			}
			if string(got) != wantFile {
				t.Errorf("the document holds %q, want %q", got, wantFile)
			}
			if st, err := os.Stat(file); err != nil || st.Mode().Perm() != wantMode {
				t.Errorf("the document's mode is %v (%v), want %v", st.Mode().Perm(), err, wantMode)
			}
			code, body = httpDo(t, "GET", s2.Banner.IngressURL+"/workspace/status", g.SessionToken, nil)
			var st struct {
				Version int64 `json:"version"`
			}
			if code != 200 || json.Unmarshal(body, &st) != nil {
				t.Fatalf("status with the old session: %d %s", code, body)
			}
			if st.Version != wantVersion {
				t.Errorf("version %d after serving, want %d", st.Version, wantVersion)
			}
			said := strings.Contains(s2.stderr.String(), "wrote it back from version 2")
			if said != (tc.old == "") {
				t.Errorf("the notice on stderr: %v, want %v\n%s", said, tc.old == "", s2.stderr.String())
			}
		})
	}
}
