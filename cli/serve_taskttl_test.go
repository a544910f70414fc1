package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// --task-ttl shortens a task's time to live so soak and expiry tests can
// see tasks expire and be purged; a value outside 1s..24h is refused before
// anything is created.
func TestServeTaskTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value string }{
		{"zero_is_refused", "0s"},
		{"below_a_second_is_refused", "500ms"},
		{"longer_than_the_product_ttl_is_refused", "25h"},
		{"not_a_duration_is_refused", "soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := ce(t, dir, nil, "serve", "notes.md", "--json", "--task-ttl", tc.value)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d\n%s", r.code, exitUsage, r.output())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("a refused --task-ttl left files behind: %v", entries)
			}
		})
	}
	t.Run("a_task_carries_the_configured_ttl", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "serve", "notes.md", "--json", "--task-ttl", "90s")
		g := join(t, dir, s.Banner.Invite, "owner")
		code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", g.SessionToken, map[string]any{"summary": "expire soon"})
		if code != 200 {
			t.Fatalf("create: %d %s", code, body)
		}
		var created struct {
			Handoff struct {
				TaskID string `json:"task_id"`
			} `json:"handoff"`
		}
		if err := json.Unmarshal(body, &created); err != nil || created.Handoff.TaskID == "" {
			t.Fatalf("create answered %s", body)
		}
		code, body = httpDo(t, "GET", s.Banner.IngressURL+"/workspace/task?task_id="+created.Handoff.TaskID, g.SessionToken, nil)
		var task struct {
			TTLMs int64 `json:"ttlMs"`
		}
		if code != 200 || json.Unmarshal(body, &task) != nil {
			t.Fatalf("task: %d %s", code, body)
		}
		if task.TTLMs != 90_000 {
			t.Errorf("ttlMs = %d, want 90000 from --task-ttl 90s", task.TTLMs)
		}
	})
}
