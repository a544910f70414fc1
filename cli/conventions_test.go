package cli

// The command line a newcomer meets first (issue 29 item 1), with the real
// binary: version and help, a typo that creates nothing, --workspace found
// from the room served in the current directory, one line of JSON.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// entries lists dir's names, to show a command created nothing.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		inStdout []string
	}{
		{"version_prints_the_version", []string{"version"}, 0, []string{"ce ", "go1."}},
		{"dash_dash_version_prints_the_version", []string{"--version"}, 0, []string{"ce ", "go1."}},
		{"version_json_names_version_and_go", []string{"version", "--json"}, 0, []string{`"version":`, `"go":"go1.`}},
		{"help_lists_the_commands", []string{"help"}, 0, []string{"serve", "status", "version", "help"}},
		{"help_of_a_command_shows_its_flags", []string{"help", "status"}, 0, []string{"ce status", "-workspace"}},
		{"help_of_an_unknown_command_is_a_usage_error", []string{"help", "stauts"}, exitUsage, nil},
		{"version_with_an_argument_is_a_usage_error", []string{"version", "now"}, exitUsage, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := ce(t, dir, nil, tc.args...)
			if r.code != tc.code {
				t.Fatalf("ce %v: exit %d, want %d\n%s", tc.args, r.code, tc.code, r.output())
			}
			for _, want := range tc.inStdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("ce %v: stdout lacks %q:\n%s", tc.args, want, r.stdout)
				}
			}
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("ce %v created %v", tc.args, got)
			}
		})
	}
}

func TestUnknownCommandCreatesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ word, want string }{
		{"stauts", `did you mean "status"`},
		{"version2", `did you mean "version"`},
		{"notes", "ends in .md"},
	} {
		t.Run(tc.word, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := ce(t, dir, nil, tc.word)
			if r.code != exitUsage {
				t.Fatalf("ce %s: exit %d, want %d\n%s", tc.word, r.code, exitUsage, r.output())
			}
			if !strings.Contains(r.stderr, `unknown command "`+tc.word+`"`) || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("ce %s: stderr %q, want the word and %q", tc.word, r.stderr, tc.want)
			}
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("ce %s created %v", tc.word, got)
			}
		})
	}
	t.Run("an_existing_file_without_md_is_still_served", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "notes.txt", "--json")
		if s.Banner.WorkspaceID == "" {
			t.Fatalf("banner %s", s.Line)
		}
		if code := s.stop(syscall.SIGINT); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
}

func TestWorkspaceFromTheRoomServedHere(t *testing.T) {
	t.Parallel()
	served := t.TempDir()
	s := startServe(t, served, "serve", "notes.md", "--json")

	t.Run("the_one_room_served_here_is_used", func(t *testing.T) {
		r := mustCE(t, served, nil, "status", "--json")
		var st statusOut
		decodeJSON(t, r, &st)
		if st.Status.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("status of %s, want the served room %s", st.Status.WorkspaceID, s.Banner.WorkspaceID)
		}
	})
	t.Run("no_room_served_here_says_the_flag_is_required", func(t *testing.T) {
		dir := t.TempDir()
		r := ce(t, dir, nil, "status")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--workspace FILE is required") {
			t.Fatalf("exit %d, stderr %q; want %d and the flag named", r.code, r.stderr, exitUsage)
		}
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("created %v", got)
		}
	})
	t.Run("a_stopped_rooms_credential_is_not_a_served_room", func(t *testing.T) {
		dir := t.TempDir()
		stopped := startServe(t, dir, "serve", "old.md", "--json")
		stopped.kill9() // leaves old.md.commonroom.owner naming a dead process
		if !exists(ownerOf(filepath.Join(dir, "old.md"))) {
			t.Fatal("the killed room left no credential behind: this case tests nothing")
		}
		r := ce(t, dir, nil, "status")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--workspace FILE is required") {
			t.Fatalf("exit %d, stderr %q; want the flag required", r.code, r.stderr)
		}
	})
	t.Run("two_rooms_served_here_are_both_named", func(t *testing.T) {
		dir := t.TempDir()
		startServe(t, dir, "serve", "a.md", "--json")
		startServe(t, dir, "serve", "b.md", "--json")
		r := ce(t, dir, nil, "status")
		if r.code != exitUsage || !strings.Contains(r.stderr, "2 rooms") || !strings.Contains(r.stderr, "a.md") || !strings.Contains(r.stderr, "b.md") {
			t.Fatalf("exit %d, stderr %q; want both rooms named", r.code, r.stderr)
		}
	})
	t.Run("CE_WORKSPACE_beats_the_room_served_here", func(t *testing.T) {
		r := ce(t, served, []string{"CE_WORKSPACE=absent.md"}, "status")
		if r.code == 0 || exists(filepath.Join(served, "absent.md")) {
			t.Fatalf("exit %d, absent.md created %v: the environment's workspace was not the one read", r.code, exists(filepath.Join(served, "absent.md")))
		}
	})
}

func TestJSONOutputIsOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startServe(t, dir, "serve", "notes.md", "--json")
	for _, args := range [][]string{
		{"version", "--json"},
		{"status", "--json"},
		{"invite", "--json"},
		{"invites", "--json"},
		{"participants", "--json"},
		{"handoffs", "--json"},
		{"leases", "--json"},
		{"history", "--json"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			r := mustCE(t, dir, nil, args...)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != 1 || !strings.HasSuffix(r.stdout, "\n") {
				t.Fatalf("ce %v printed %d lines, want one:\n%s", args, len(lines), r.stdout)
			}
			if !json.Valid([]byte(lines[0])) {
				t.Fatalf("ce %v: not JSON: %s", args, lines[0])
			}
			if slices.Contains(args, "invite") && strings.Contains(lines[0], `\u0026`) {
				t.Errorf("ce invite --json escapes &: %s", lines[0])
			}
		})
	}
}
