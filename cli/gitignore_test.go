package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bannerText waits for the text banner (serve without --json) to end with
// its READY line and returns it.
func (s *server) bannerText() string {
	s.t.Helper()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for !strings.Contains(s.stdout.String(), "Status: READY") {
		select {
		case <-s.stdout.Notify():
		case <-s.done:
			s.t.Fatalf("ce serve exited:\n%s\n%s", s.stdout.String(), s.stderr.String())
		case <-deadline.C:
			s.t.Fatalf("no banner within %v:\n%s", readyTimeout, s.stdout.String())
		}
	}
	return s.stdout.String()
}

// gitInit makes dir a git work tree with the real git.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
}

// TestServeWarnsWhenGitWouldCommitTheRoom: a document in a git work tree
// that does not ignore the room's files gets one warning naming the
// .gitignore line; ignored, or outside a work tree, it gets none.
func TestServeWarnsWhenGitWouldCommitTheRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		git       bool
		gitignore string
		sub       string // the document's directory below the work tree
		warn      bool
	}{
		{"a_work_tree_that_does_not_ignore_the_room_is_warned", true, "", "", true},
		{"a_document_deeper_in_the_work_tree_is_warned", true, "*.log\n", "docs/ideas", true},
		{"a_work_tree_that_ignores_the_room_is_not_warned", true, roomFilesPattern + "\n", "", false},
		{"an_ignore_that_names_the_sidecar_alone_is_enough", true, "*.commonroom.db\n", "docs", false},
		{"outside_a_work_tree_nothing_is_said", false, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if tc.git {
				gitInit(t, root)
			}
			if tc.gitignore != "" {
				if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte(tc.gitignore), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(root, tc.sub)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Run("banner", func(t *testing.T) {
				s := spawnServe(t, dir, nil, "serve", "notes.md")
				out := s.bannerText()
				said := strings.Contains(out, "git work tree") && slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
					return strings.TrimSpace(l) == roomFilesPattern // the line to paste, alone on its line
				})
				if said != tc.warn {
					t.Errorf("warned %v, want %v:\n%s", said, tc.warn, out)
				}
				if n := strings.Count(out, "git work tree"); n > 1 {
					t.Errorf("said %d times, want once:\n%s", n, out)
				}
				s.stop(syscall.SIGTERM)
			})
			t.Run("json_log", func(t *testing.T) {
				s := startServe(t, dir, "serve", "notes.md", "--json")
				if said := strings.Contains(s.stderr.String(), "git work tree"); said != tc.warn {
					t.Errorf("logged %v, want %v:\n%s", said, tc.warn, s.stderr.String())
				}
				s.stop(syscall.SIGTERM)
			})
		})
	}
}

// TestBannerSaysHowLongTheInvitationLasts: the banner gives the
// invitation's lifetime and how to make a longer one; --json its expiry.
func TestBannerSaysHowLongTheInvitationLasts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := spawnServe(t, dir, nil, "serve", "notes.md")
	out := s.bannerText()
	for _, want := range []string{"Invitation (one use, lasts 1 h: expires ", "ce invite --workspace ", "--expires MINUTES --max-uses N"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	s.stop(syscall.SIGTERM)

	j := startServe(t, dir, "serve", "notes.md", "--json")
	var line map[string]any
	decodeJSON(t, result{stdout: j.Line}, &line)
	at, _ := line["invite_expires_at"].(string)
	exp, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || time.Until(exp) < 50*time.Minute || time.Until(exp) > 61*time.Minute {
		t.Errorf("invite_expires_at %q: want about an hour from now (%v)", at, err)
	}
}

func TestInviteLifetime(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{time.Hour, "1 h"},
		{59*time.Minute + 50*time.Second, "1 h"},
		{90 * time.Minute, "1 h 30 min"},
		{20 * time.Minute, "20 min"},
		{7 * 24 * time.Hour, "168 h"},
		{10 * time.Second, "under a minute"},
	} {
		if got := inviteLifetime(now, now.Add(tc.in).Format(time.RFC3339Nano)); got != tc.want {
			t.Errorf("inviteLifetime(+%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := shellQuote("/tmp/my notes.md"); got != `'/tmp/my notes.md'` {
		t.Errorf("shellQuote = %s", got)
	}
	if got := shellQuote("/tmp/notes.md"); got != "/tmp/notes.md" {
		t.Errorf("shellQuote = %s", got)
	}
}
