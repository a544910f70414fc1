package room

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
)

// SidecarSchema is the schema version of the sidecar at dbPath (0 when there
// is none yet), read without writing to it, so ce serve can say before
// OpenStore that it is about to upgrade an older sidecar: migration 10
// rebuilds the handoffs and tasks tables, which takes seconds at a million
// handoffs, and the room answers nothing until it is done.
func SidecarSchema(ctx context.Context, dbPath string) (int, error) {
	st, err := os.Stat(dbPath)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	h, err := readSidecarHeader(ctx, dbPath)
	return h.userVersion, err
}

// sidecarHeader is what a look at an existing file finds: SQLite's
// application_id and user_version, and how many schema objects it has.
type sidecarHeader struct{ appID, userVersion, tables int }

// readSidecarHeader reads dbPath's header through a read-only connection,
// never writing to it (checkForeign refuses a foreign or newer file with
// it; SidecarSchema tells ce serve an upgrade is coming).
func readSidecarHeader(ctx context.Context, dbPath string) (sidecarHeader, error) {
	var h sidecarHeader
	db, err := sql.Open("sqlite", dsn(dbPath, "query_only(1)")+"&mode=ro")
	if err != nil {
		return h, err
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&h.appID)
	if err == nil {
		err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&h.userVersion)
	}
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&h.tables)
	}
	return h, err
}
