package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --wal-autocheckpoint 0 leaves the sidecar's WAL to Litestream: ce itself
// never copies it into the database file, however long it grows; with N
// pages ce checkpoints once N pages wait (4,000 by default). A negative
// value is refused before anything is created.
func TestServeWALAutocheckpoint(t *testing.T) {
	t.Parallel()
	t.Run("the_default_is_4000_pages", func(t *testing.T) {
		t.Parallel()
		fs, f, _ := newServeFlagSet(Env{})
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if f.walCkpt != 4000 {
			t.Errorf("--wal-autocheckpoint defaults to %d pages, want 4000", f.walCkpt)
		}
	})
	t.Run("a_negative_value_is_refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := ce(t, dir, nil, "serve", "notes.md", "--json", "--wal-autocheckpoint", "-1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--wal-autocheckpoint") {
			t.Fatalf("exit %d, want %d with a message naming the flag\n%s", r.code, exitUsage, r.output())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("a refused flag left files behind: %v", entries)
		}
	})
	for _, tc := range []struct {
		name       string
		flag       []string
		checkpoint bool // whether ce is expected to have backfilled the db file
	}{
		{"0_leaves_the_WAL_alone", []string{"--wal-autocheckpoint", "0"}, false},
		{"1000_checkpoints_after_1000_pages", []string{"--wal-autocheckpoint", "1000"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, append([]string{"serve", "notes.md", "--json", "--rate-limit", "0"}, tc.flag...)...)
			var inv inviteGrant
			decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--capabilities", "read,admin"), &inv)
			g := join(t, dir, inv.URI, "editor")
			db := sidecarOf(file)
			st0, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			// 400 versions of 16 KB each: over 6 MiB of pages, well past
			// 1,000 pages of WAL (4 MiB at SQLite's 4 KiB pages).
			filler := strings.Repeat("All work and no play. ", 750)
			for v := int64(1); v <= 400; v++ {
				code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/commit", g.SessionToken, map[string]any{
					"base_version": v, "summary": "fill", "content": fmt.Sprintf("# Notes\n\n%d %s\n", v, filler)})
				if code != 200 {
					t.Fatalf("commit %d: %d %s", v, code, body)
				}
				var res struct {
					Version int64 `json:"version"`
				}
				json.Unmarshal(body, &res)
				if res.Version != v+1 {
					t.Fatalf("commit on %d made version %d", v, res.Version)
				}
			}
			st1, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			wal, err := os.Stat(db + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			grew := st1.Size() > st0.Size()
			if grew != tc.checkpoint {
				t.Errorf("after 6 MiB of versions the db file went from %d to %d bytes (WAL %d); checkpointed by ce: %v, want %v",
					st0.Size(), st1.Size(), wal.Size(), grew, tc.checkpoint)
			}
			if !tc.checkpoint && wal.Size() < 6<<20 {
				t.Errorf("the WAL holds %d bytes after 6 MiB of versions without checkpoints", wal.Size())
			}
		})
	}
}
