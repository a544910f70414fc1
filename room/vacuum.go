package room

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Space comes back (issue 26 item 3). Every sidecar this ce creates is in
// SQLite's incremental auto-vacuum mode (the writer's connection asks for
// it before anything is written, OpenStore), so the pages that deletes free
// can be given back to the filesystem a few at a time (VacuumStep), which
// the writer does when the room is idle (actor/vacuum.go). A sidecar made
// by an older ce (auto_vacuum NONE) is converted once, at start, by one
// VACUUM (convertAutoVacuum): that is not a numbered migration, because
// VACUUM cannot run inside a migration's transaction; it is decided by
// reading PRAGMA auto_vacuum, so it runs exactly until it has succeeded.

// VacuumConversion is what OpenStore did to a sidecar that was not yet in
// incremental auto-vacuum mode.
type VacuumConversion struct {
	// Took is how long the VACUUM ran, failed or not.
	Took time.Duration
	// Err is why the VACUUM failed (a full disk, say): the sidecar is then
	// exactly as it was, the room serves it in its old mode, and the next
	// start tries again.
	Err error
}

// Conversion reports the conversion OpenStore ran, if it ran one.
func (s *Store) Conversion() (VacuumConversion, bool) {
	if s.conversion == nil {
		return VacuumConversion{}, false
	}
	return *s.conversion, true
}

// autoVacuumMode reads PRAGMA auto_vacuum on q (0 none, 1 full, 2
// incremental).
func autoVacuumMode(ctx context.Context, q Querier) (int, error) {
	var mode int
	if err := q.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return 0, Internal(err)
	}
	return mode, nil
}

// convertAutoVacuum turns an existing sidecar whose auto_vacuum is not
// INCREMENTAL into one that is, with one VACUUM, and reports it; it returns
// nil for a sidecar already in that mode (every one this ce created, and
// every one it converted). force runs the VACUUM anyway: migration 6 leaves
// most of an older sidecar free, and its VACUUM is this one.
func convertAutoVacuum(ctx context.Context, conn *sql.Conn, force bool) *VacuumConversion {
	mode, err := autoVacuumMode(ctx, conn)
	if err != nil {
		return &VacuumConversion{Err: err}
	}
	if mode == autoVacuumIncremental && !force {
		return nil
	}
	started := time.Now()
	err = vacuumInto(ctx, conn)
	return &VacuumConversion{Took: time.Since(started), Err: err}
}

// vacuumInto sets incremental auto-vacuum and rebuilds the whole database
// with VACUUM, then gives the WAL back. VACUUM copies the database into a
// temporary file and then writes every page of the copy through the WAL in
// one transaction, so it needs free disk space for both; if the disk fills
// meanwhile, the transaction is rolled back and the sidecar is exactly as it
// was (SQLite's atomic commit), and the truncating checkpoint after it
// hands back what the half-written WAL took. The temporary copy goes to a
// file, not memory: the writer's connection keeps temporary tables in
// memory, which for VACUUM would hold the whole sidecar (a GB at a million
// handoffs) in the process.
func vacuumInto(ctx context.Context, conn *sql.Conn) error {
	var err error
	for _, stmt := range []string{
		fmt.Sprintf("PRAGMA auto_vacuum = %d", autoVacuumIncremental),
		"PRAGMA temp_store = FILE",
		"VACUUM",
	} {
		if _, err = conn.ExecContext(ctx, stmt); err != nil {
			break
		}
	}
	conn.ExecContext(context.Background(), "PRAGMA temp_store = MEMORY")
	// Best effort either way: after a VACUUM the WAL holds a copy of the
	// whole database; after a failed one it holds what was written before
	// the disk filled.
	conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
	if err != nil {
		return Errorf(KindInternal, "VACUUM failed; the sidecar is unchanged").wrap(err)
	}
	if mode, merr := autoVacuumMode(ctx, conn); merr != nil || mode != autoVacuumIncremental {
		return Errorf(KindInternal, "the sidecar's auto_vacuum is %d after VACUUM, want %d (%v)", mode, autoVacuumIncremental, merr)
	}
	return nil
}

// CompactOffline rebuilds the sidecar with one VACUUM (every free page
// given back, every table and index packed), for ce compact when no room
// is serving: the caller holds the writer lock and nothing else has the
// store open for writing. It converts a sidecar still in the old mode too.
func (s *Store) CompactOffline(ctx context.Context) error {
	if s.Writer == nil {
		return Errorf(KindInternal, "the store was opened read-only")
	}
	conn, err := s.Writer.Conn(ctx)
	if err != nil {
		return Internal(err)
	}
	defer conn.Close()
	return vacuumInto(ctx, conn)
}

// FreePages is how many pages of the database are unused (PRAGMA
// freelist_count): reading it touches only the database header.
func FreePages(ctx context.Context, q Querier) (int64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&n); err != nil {
		return 0, Internal(err)
	}
	return n, nil
}

// IncrementalAutoVacuum reports whether q's database is in incremental
// auto-vacuum mode, the one in which VacuumStep gives pages back.
func IncrementalAutoVacuum(ctx context.Context, q Querier) (bool, error) {
	mode, err := autoVacuumMode(ctx, q)
	return mode == autoVacuumIncremental, err
}

// VacuumStep gives up to pages free pages back to the filesystem (PRAGMA
// incremental_vacuum): SQLite moves that many pages from the end of the
// database into free slots and truncates the end, in one transaction of
// its own, so q must be the writer's connection with no transaction open.
// In WAL mode the database file shrinks at the next checkpoint that copies
// the whole WAL. It returns the free pages before and after.
func VacuumStep(ctx context.Context, q Querier, pages int) (before, after int64, err error) {
	if pages <= 0 {
		return 0, 0, Errorf(KindInvalidRequest, "a vacuum step gives back 1 page or more (got %d)", pages)
	}
	if before, err = FreePages(ctx, q); err != nil {
		return 0, 0, err
	}
	if _, err = q.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", pages)); err != nil {
		return before, before, Internal(err)
	}
	after, err = FreePages(ctx, q)
	return before, after, err
}

// TruncateWAL copies the whole WAL into the database file and empties it
// (PRAGMA wal_checkpoint(TRUNCATE)), waiting at most wait for readers that
// still need its frames. It reports whether it got that far: a busy answer
// leaves the WAL to the next checkpoint. q must be the writer's connection
// with no transaction open (ce compact through the room runs it between two
// batches), and its busy timeout is restored afterwards.
func TruncateWAL(ctx context.Context, q Querier, wait time.Duration) (bool, error) {
	var prev int
	if err := q.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&prev); err != nil {
		return false, Internal(err)
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", max(wait.Milliseconds(), 1))); err != nil {
		return false, Internal(err)
	}
	defer q.ExecContext(context.Background(), fmt.Sprintf("PRAGMA busy_timeout = %d", prev))
	var busy, log, done int
	if err := q.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil {
		return false, Internal(err)
	}
	return busy == 0, nil
}
