package room

import (
	"context"
	"os"
	"testing"
)

// reopenMigrated opens the sidecar at path, which a test filled at an
// older schema, as ce serve would (migrating it in place), and checks it
// reached the current schema with wantRows rows in table. The store closes
// with the test.
func reopenMigrated(t *testing.T, path, table string, wantRows int) *Store {
	t.Helper()
	st, err := OpenStore(context.Background(), path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The migrations' WAL was copied into the database and the file given
	// back (migration 10 leaves one as large as the tables it rebuilt).
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("after the migrations the WAL holds %d bytes, want 0", fi.Size())
	}
	var version, rows int
	if err := st.Reader.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM `+table+`)`).Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version != SchemaVersion() || rows != wantRows {
		t.Fatalf("after opening: schema %d (want %d), %d rows in %s (want %d)", version, SchemaVersion(), rows, table, wantRows)
	}
	return st
}

// tableIndexes names table's indexes, sorted, leaving out the ones SQLite
// makes for UNIQUE and PRIMARY KEY constraints.
func tableIndexes(t *testing.T, st *Store, table string) []string {
	t.Helper()
	rows, err := st.Reader.Query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
