package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// TestServeRetentionFlagsRefuseBadInput: every bad window, size or archive
// is refused at start with a message naming the flag, from the command
// line or the config file, and (but for an archive it cannot open, found
// once the room is being opened) before anything is created.
func TestServeRetentionFlagsRefuseBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		config string // the config file's text; "" = none
		want   string
		clean  bool // nothing may be left beside the document
	}{
		{"a_zero_window_is_refused", []string{"--retain-handoffs", "0"}, "", "--retain-handoffs: a window of 0", true},
		{"a_negative_window_is_refused", []string{"--retain-sessions", "-3d"}, "", "--retain-sessions: -3d is negative", true},
		{"a_window_under_the_task_ttl_is_refused", []string{"--retain-versions", "12h"}, "", "shorter than the task TTL", true},
		{"an_absurd_window_is_refused", []string{"--retain-proposals", "36500d"}, "", "longer than the longest window", true},
		{"a_window_that_is_not_one_is_refused", []string{"--retain-invitations", "soon"}, "", "not a window", true},
		{"an_archive_without_a_window_is_refused", []string{"--archive", "arch.jsonl"}, "", "no --retain-* window is set", true},
		{"a_negative_share_is_refused", []string{"--storage-per-participant", "-1"}, "", "--storage-per-participant: -1 is negative", true},
		{"a_share_that_is_not_a_size_is_refused", []string{"--storage-per-participant", "lots"}, "", "not a size", true},
		{"a_bad_window_in_the_config_file_is_refused", nil, "# retention\nretain-handoffs 1h\n", "--retain-handoffs: 1h is shorter", true},
		{"an_unwritable_archive_is_refused", []string{"--retain-handoffs", "2d", "--archive", "/proc/no-such-dir/archive.jsonl"}, "", "--archive: cannot open", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"serve", "notes.md", "--json"}, tc.args...)
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "serve.conf"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", "serve.conf")
			}
			r := ce(t, dir, nil, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %d with %q\n%s", r.code, exitUsage, tc.want, r.output())
			}
			if r.stdout != "" {
				t.Errorf("a refused serve printed a banner: %s", r.stdout)
			}
			if !tc.clean {
				return
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() != "notes.md" && e.Name() != "serve.conf" {
					t.Errorf("a refused serve left %s behind", e.Name())
				}
			}
		})
	}
}

// TestServeRetentionFromTheConfigFileAndTheShareAtTheDoor: a config file
// sets the windows, the archive directory and a small share; the room
// starts, creates the archive, and refuses a participant's flood with
// limit_exceeded naming the scope and when it frees.
func TestServeRetentionFromTheConfigFileAndTheShareAtTheDoor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	if err := os.Mkdir(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := "retain-handoffs 180d\nretain-versions 30d\nretain-sessions 7d\narchive " + archive + "\nstorage-per-participant 4KiB\n"
	if err := os.WriteFile(filepath.Join(dir, "serve.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json", "--config", "serve.conf")
	if !exists(filepath.Join(archive, room.ArchiveFileName)) {
		t.Fatal("the archive was not created at start")
	}
	g := join(t, dir, s.Banner.Invite, "flooder")
	big := strings.Repeat("x", 2000) // 3024 bytes counted: one fits in 4 KiB, two do not
	code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", g.SessionToken, map[string]any{"summary": big})
	if code != 200 {
		t.Fatalf("first create: %d %s", code, body)
	}
	code, body = httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", g.SessionToken, map[string]any{"summary": big})
	var refusal map[string]any
	if code != 429 || json.Unmarshal(body, &refusal) != nil || refusal["error"] != "limit_exceeded" ||
		refusal["scope"] != room.ScopeStorage || refusal["frees_at"] == nil || refusal["limit"] != float64(4096) {
		t.Fatalf("second create: %d %s, want 429 limit_exceeded with scope %s, frees_at and limit 4096", code, body, room.ScopeStorage)
	}
}

// TestCLIReadsSayPruned: a room whose retention pruned a handoff and
// thinned its versions (built with a fake clock) is read by the real
// binary: ce handoff and ce diff --base say "pruned" and exit not-found;
// an id or version that never existed says "not found"/"does not exist".
func TestCLIReadsSayPruned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(doc, []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	clock := room.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	eng.Clock = clock.Now
	eng.Retention = room.Retention{Handoffs: 24 * time.Hour, Versions: 24 * time.Hour}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st, HostName: "host", PruneEvery: 1000 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	op := room.Operator(eng.HostID)
	res, err := actor.Do(ctx, r, "create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
		return eng.CreateHandoff(tx, op, room.CreateHandoffInput{Summary: "old"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := actor.Do(ctx, r, "cancel", func(tx *room.Tx) (room.Empty, error) {
		return eng.CancelTask(tx, op, room.TaskIDInput{TaskID: res.Task.TaskID})
	}); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"# Notes\n\none\n", "# Notes\n\ntwo\n"} {
		base := int64(i + 1)
		if _, err := actor.Do(ctx, r, "commit", func(tx *room.Tx) (room.CommitResult, error) {
			return eng.Commit(tx, op, room.CommitInput{BaseVersion: &base, Summary: "edit", Content: &text})
		}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(50 * time.Hour)
	if got, err := r.Prune(ctx); err != nil || got.Handoffs != 1 || got.Versions != 2 {
		t.Fatalf("prune: %+v, %v; want the handoff and versions 1 and 2", got, err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	eng.Close()

	hid := res.Handoff.HandoffID
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a_pruned_handoff_reads_pruned", []string{"handoff", hid, "--workspace", "notes.md"}, "handoff " + hid + " was pruned"},
		{"a_pruned_version_reads_pruned", []string{"diff", "--workspace", "notes.md", "--base", "1"}, "version 1 was pruned"},
		{"an_unknown_handoff_reads_not_found", []string{"handoff", "handoff_0123456789abcdef0123456789abcdef", "--workspace", "notes.md"}, "unknown handoff"},
		{"a_version_never_made_reads_does_not_exist", []string{"diff", "--workspace", "notes.md", "--base", "9"}, "version 9 does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, tc.args...)
			if r.code != exitNotFound || !strings.Contains(r.output(), tc.want) {
				t.Fatalf("exit %d, want %d with %q\n%s", r.code, exitNotFound, tc.want, r.output())
			}
			if strings.Contains(tc.name, "unknown") || strings.Contains(tc.name, "never") {
				if strings.Contains(r.output(), "pruned") {
					t.Fatalf("a record that never existed reads as pruned: %s", r.output())
				}
			}
		})
	}
}
