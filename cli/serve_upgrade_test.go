package cli

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestServeSaysWhenItUpgradesTheSidecar: opening an older sidecar migrates
// it before the room serves, which takes seconds at a million handoffs
// (migration 10 rebuilds two tables), so ce serve logs that it is upgrading
// before it starts and how long it took once done; a current sidecar opens
// without either line. The older sidecar is a current one whose
// user_version says 9: migration 10 rebuilds the tables again, to the same
// schema.
func TestServeSaysWhenItUpgradesTheSidecar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, dir, "serve", "notes.md", "--json")
	first.stop(syscall.SIGTERM)
	// Back to schema 9: migration 10 is written to run again on its own
	// result; the columns later migrations add are taken out first (11:
	// invites.label; 12: the storage share's tables; 13: the followers'
	// index and the chunks' refs), since they cannot run twice.
	if err := setUserVersion(filepath.Join(dir, sidecarOf("notes.md")), 9, `ALTER TABLE invites DROP COLUMN label`,
		`DROP TABLE storage_usage`, `DROP TABLE pruned_ids`, `DROP INDEX handoffs_followed`, `ALTER TABLE version_chunks DROP COLUMN refs`); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		upgrades bool
	}{
		{"an_older_sidecar_is_announced_and_timed", true},
		{"a_current_sidecar_opens_silently", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServe(t, dir, "serve", "notes.md", "--json")
			s.stop(syscall.SIGTERM)
			logs := s.stderr.String()
			for _, line := range []string{`msg="upgrading the sidecar to this ce's schema`, `msg="upgraded the sidecar"`} {
				if strings.Contains(logs, line) != tc.upgrades {
					t.Errorf("the log has %s: %v, want %v\n%s", line, !tc.upgrades, tc.upgrades, logs)
				}
			}
			if tc.upgrades && !strings.Contains(logs, fmt.Sprintf("from=9 to=%d", room.SchemaVersion())) {
				t.Errorf("the upgrade line does not name the schemas:\n%s", logs)
			}
			var v int
			db, err := sql.Open("sqlite", filepath.Join(dir, sidecarOf("notes.md")))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != room.SchemaVersion() {
				t.Fatalf("user_version %d (%v) after serving, want %d", v, err, room.SchemaVersion())
			}
		})
	}
}

// setUserVersion runs undo (statements taking out what later migrations
// added) and stamps the sidecar at path with schema version v.
func setUserVersion(path string, v int, undo ...string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range undo {
		if _, err := db.Exec(q); err != nil {
			return err
		}
	}
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v))
	return err
}
