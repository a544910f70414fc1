package room

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
)

// SidecarSize is what the sidecar takes on disk: the database file and its
// write-ahead log (the -shm index is a few KB and not counted). The owner
// page shows it; Space adds SQLite's view.
type SidecarSize struct {
	Bytes    int64 `json:"bytes"` // DBBytes + WALBytes
	DBBytes  int64 `json:"db_bytes"`
	WALBytes int64 `json:"wal_bytes"`
}

// Space is the sidecar's size as the filesystem and SQLite see it (issue
// 26 items 3 and 5): ce status, /debug/metrics and ce compact show it, so a
// room that has lived for years says what it takes and what it could give
// back.
type Space struct {
	SidecarSize
	// PageSize, PageCount and FreePages are SQLite's: the database holds
	// PageCount pages of PageSize bytes, FreePages of them unused (the room
	// reuses them before the file grows; in incremental auto-vacuum mode the
	// writer gives them back to the filesystem when idle, and the database
	// file shrinks at the next checkpoint).
	PageSize  int64 `json:"page_size"`
	PageCount int64 `json:"page_count"`
	FreePages int64 `json:"free_pages"`
	// AutoVacuum is SQLite's auto_vacuum mode: "incremental" for every
	// sidecar this ce writes, "none" for one a ce before issue 26 made and
	// whose conversion at start has not happened yet (or failed).
	AutoVacuum string `json:"auto_vacuum"`
}

// autoVacuumModes are PRAGMA auto_vacuum's values by number.
var autoVacuumModes = map[int]string{0: "none", 1: "full", 2: "incremental"}

// autoVacuumIncremental is PRAGMA auto_vacuum's number for INCREMENTAL.
const autoVacuumIncremental = 2

// readPages fills the SQLite half of a Space from q with PRAGMA
// statements, which a query_only connection may run. SQLite prepares all
// but freelist_count again on every run (a pragma that could change
// something runs only once per preparation): a few microseconds, paid by
// ce status and /debug/metrics, never by a read that runs often (the owner
// page reads only the files: Engine.SidecarSize).
func readPages(ctx context.Context, q Querier, s *Space) error {
	var mode int
	for _, p := range []struct {
		pragma string
		into   any
	}{
		{"PRAGMA page_size", &s.PageSize},
		{"PRAGMA page_count", &s.PageCount},
		{"PRAGMA freelist_count", &s.FreePages},
		{"PRAGMA auto_vacuum", &mode},
	} {
		if err := q.QueryRowContext(ctx, p.pragma).Scan(p.into); err != nil {
			return Internal(err)
		}
	}
	s.AutoVacuum = autoVacuumModes[mode]
	return nil
}

// fileSizes stats the sidecar and its WAL; a missing WAL is 0 bytes (it
// exists only while a connection has the database open in WAL mode).
func fileSizes(db string) (SidecarSize, error) {
	st, err := os.Stat(db)
	if err != nil {
		return SidecarSize{}, err
	}
	z := SidecarSize{DBBytes: st.Size()}
	switch st, err := os.Stat(db + "-wal"); {
	case err == nil:
		z.WALBytes = st.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return SidecarSize{}, err
	}
	z.Bytes = z.DBBytes + z.WALBytes
	return z, nil
}

// Space reads the sidecar's size: its files through the directory the store
// holds (the sidecar wherever its directory has been moved) and SQLite's
// page counts through the read pool.
func (s *Store) Space(ctx context.Context) (Space, error) {
	var sp Space
	if err := readPages(ctx, s.Reader, &sp); err != nil {
		return Space{}, err
	}
	return sp, s.statFiles(&sp)
}

// statFiles fills the file half of sp from the sidecar the store holds.
func (s *Store) statFiles(sp *Space) error {
	z, err := fileSizes(s.file())
	if err != nil {
		return Internal(err)
	}
	sp.SidecarSize = z
	return nil
}

// SidecarSpace reads the size of the sidecar at dbPath without writing to
// it (a read-only connection, as SidecarSchema), for ce serve to log before
// OpenStore converts an older sidecar to incremental auto-vacuum. A missing
// or empty file is the zero Space (AutoVacuum "": nothing to convert).
func SidecarSpace(ctx context.Context, dbPath string) (Space, error) {
	st, err := os.Stat(dbPath)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		return Space{}, nil
	}
	if err != nil {
		return Space{}, err
	}
	db, err := sql.Open("sqlite", dsn(dbPath, "query_only(1)")+"&mode=ro")
	if err != nil {
		return Space{}, err
	}
	defer db.Close()
	var sp Space
	if err := readPages(ctx, db, &sp); err != nil {
		return Space{}, err
	}
	if sp.SidecarSize, err = fileSizes(dbPath); err != nil {
		return Space{}, err
	}
	return sp, nil
}

// Storage is the sidecar's space and what retention removed, as ce status,
// /debug/metrics and the owner page show them (issue 26 item 5).
type Storage struct {
	Space
	// Pruned counts what retention has removed, by kind of record (e.g.
	// "handoffs", "versions") since the room started, only the kinds it
	// removed any of: empty while no retention policy is set or nothing was
	// old enough. The totals live in memory; a restart starts them again.
	Pruned map[string]int64 `json:"pruned"`
}

// Storage reads the sidecar's space (SQLite's page counts from q, the
// files as SidecarSize finds them) and retention's counts.
func (e *Engine) Storage(ctx context.Context, q Querier) (Storage, error) {
	var st Storage
	if err := readPages(ctx, q, &st.Space); err != nil {
		return Storage{}, err
	}
	z, err := e.SidecarSize()
	if err != nil {
		return Storage{}, err
	}
	st.SidecarSize = z
	st.Pruned = e.PruneTotals().byKind()
	return st, nil
}

// SidecarSize stats the sidecar's files: through the directory the
// attached store holds (AttachStore), or by path for an engine without one
// (ce status, which only reads).
func (e *Engine) SidecarSize() (SidecarSize, error) {
	name := SidecarPath(e.DocPath)
	if s := e.sidecar.Load(); s != nil {
		name = s.file()
	}
	z, err := fileSizes(name)
	if err != nil {
		return SidecarSize{}, Internal(err)
	}
	return z, nil
}

// AttachStore tells the engine which sidecar it runs on, so Storage stats
// that sidecar's files through the directory the store holds (not by a
// path that may lead elsewhere by then). actor.Open calls it.
func (e *Engine) AttachStore(s *Store) { e.sidecar.Store(s) }
