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
	db, err := sql.Open("sqlite", dsn(dbPath, "query_only(1)")+"&mode=ro")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var v int
	err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}
