package room

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
)

// SidecarSnapshot is what BackupSidecar copied: the room's identity and the
// newest version in the copy, whose text is what the document must hold for
// the two files to agree.
type SidecarSnapshot struct {
	WorkspaceID   string
	Version       int64
	Content       string
	ContentSHA256 string
	Bytes         int64 // the copy's size on disk
}

// BackupSidecar writes a consistent copy of the sidecar src into dst (a path
// that must not exist, or an empty file) while the room may be serving and
// writing: SQLite's VACUUM INTO reads the whole database inside one read
// transaction, so the copy is one committed state, never half of one, and
// the writer is not blocked meanwhile (WAL). The copy is fsynced, checked
// (quick_check) and read back for its newest version, so the caller writes
// the document from the copy itself and the pair agree by construction.
//
// src is opened read-only: a backup never changes the room, and a sidecar
// that is not ours (or from a newer ce) is refused untouched.
func BackupSidecar(ctx context.Context, src, dst string) (SidecarSnapshot, error) {
	var snap SidecarSnapshot
	if err := checkForeign(ctx, src, true); err != nil {
		return snap, err
	}
	db, err := sql.Open("sqlite", dsn(src, "busy_timeout(5000)")+"&mode=ro")
	if err != nil {
		return snap, Internal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var userVersion int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&userVersion); err != nil {
		return snap, Internal(err)
	}
	if userVersion == 0 {
		return snap, Errorf(KindNotFound, "no room has been opened for this file yet (run `ce serve` first)")
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return snap, Errorf(KindInternal, "copying the sidecar: %v", err)
	}
	if err := syncFile(dst); err != nil {
		return snap, Errorf(KindInternal, "syncing the copy: %v", err)
	}
	cp, err := sql.Open("sqlite", dsn(dst, "busy_timeout(5000)")+"&mode=ro")
	if err != nil {
		return snap, Internal(err)
	}
	defer cp.Close()
	cp.SetMaxOpenConns(1)
	var check string
	if err := cp.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil || check != "ok" {
		return snap, Errorf(KindInternal, "the copy does not pass quick_check (%q, %v)", check, err)
	}
	id, ok, err := getMeta(ctx, cp, "workspace_id")
	if err != nil {
		return snap, err
	}
	if !ok {
		return snap, Errorf(KindNotFound, "the sidecar holds no room yet (run `ce serve` first)")
	}
	snap.WorkspaceID = id
	// The copy's newest version, rebuilt and checked against its hash.
	r, err := readVersion(ctx, cp, 0)
	if errors.Is(err, sql.ErrNoRows) {
		return snap, Errorf(KindNotFound, "the sidecar holds no version of the document yet")
	}
	if err != nil && AsError(err) == nil {
		return snap, Internal(err)
	}
	if err != nil {
		return snap, err
	}
	snap.Version, snap.Content, snap.ContentSHA256 = r.version, r.content, r.hash
	st, err := os.Stat(dst)
	if err != nil {
		return snap, Internal(err)
	}
	snap.Bytes = st.Size()
	return snap, nil
}

// NewestVersion reads the newest version of the document from the sidecar
// at dbPath without changing anything: what `ce serve` writes back when the
// document itself is gone (a restored sidecar without its file).
func NewestVersion(ctx context.Context, dbPath string) (version int64, content string, err error) {
	if err := checkForeign(ctx, dbPath, true); err != nil {
		return 0, "", err
	}
	db, err := sql.Open("sqlite", dsn(dbPath, "busy_timeout(5000)", "query_only(1)"))
	if err != nil {
		return 0, "", Internal(err)
	}
	defer db.Close()
	// Rebuilt and checked against its hash; a sidecar an older ce left
	// (texts still in versions.content) is read as it is.
	r, err := readVersion(ctx, db, 0)
	if errors.Is(err, sql.ErrNoRows) || isNoSuchTable(err) {
		return 0, "", Errorf(KindNotFound, "the sidecar %s holds no version of the document", dbPath)
	}
	if err != nil && AsError(err) == nil {
		return 0, "", Internal(err)
	}
	if err != nil {
		return 0, "", err
	}
	return r.version, r.content, nil
}

func isNoSuchTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
