package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestStatusShowsTheSidecarsSpace: ce status says how big the sidecar is
// (its files, SQLite's pages, the free ones, the auto-vacuum mode) and what
// retention removed, as text and as JSON, whether the room serves or not.
func TestStatusShowsTheSidecarsSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json")
	s.stop(syscall.SIGTERM)
	sidecarSQL(t, filepath.Join(dir, sidecarOf("notes.md")), withFreePages...)

	for _, serving := range []bool{false, true} {
		name := "stopped"
		if serving {
			name = "serving"
			s := startServe(t, dir, "serve", "notes.md", "--json")
			defer s.stop(syscall.SIGTERM)
		}
		t.Run(name, func(t *testing.T) {
			var out struct {
				Storage struct {
					room.Space
					Pruned map[string]int64 `json:"pruned"`
				} `json:"storage"`
			}
			r := mustCE(t, dir, nil, "status", "--workspace", "notes.md", "--json")
			var raw map[string]any
			decodeJSON(t, r, &raw)
			st, _ := raw["storage"].(map[string]any)
			requireKeys(t, "storage", st, "bytes", "db_bytes", "wal_bytes", "page_size", "page_count", "free_pages", "auto_vacuum", "pruned")
			decodeJSON(t, r, &out)
			sp := out.Storage
			if sp.AutoVacuum != "incremental" || sp.PageSize != 4096 || sp.FreePages < 500 || sp.Bytes != sp.DBBytes+sp.WALBytes || sp.PageCount <= sp.FreePages {
				t.Errorf("storage = %+v", sp)
			}
			txt := mustCE(t, dir, nil, "status", "--workspace", "notes.md")
			for _, want := range []string{"sidecar=", "db_bytes=", "free_pages=", "auto_vacuum=incremental", "pruned=none"} {
				if !strings.Contains(txt.stdout, want) {
					t.Errorf("text status has no %q:\n%s", want, txt.stdout)
				}
			}
		})
	}
}
