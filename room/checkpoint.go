package room

import (
	"context"
	"database/sql"
)

// SetWALAutocheckpoint sets after about how many WAL pages the sidecar is
// checkpointed (SQLite's default is 1000). 0 turns ce's own checkpoints
// off, for a room whose sidecar Litestream replicates: Litestream's
// documentation asks the application to leave checkpoints to it under
// write load, since a checkpoint that restarts the WAL between two of its
// syncs forces it to take a full snapshot.
//
// The writer connection itself never checkpoints once this is called (its
// wal_autocheckpoint is 0): SQLite's automatic checkpoint runs inside
// COMMIT on the committing connection, and there it cost the writer about
// a tenth of its CPU and held every caller of the batch while it copied
// pages and synced the database file. With pages > 0 the store opens a
// connection of its own for checkpoints instead; the actor runs them on it
// from a goroutine of their own (CheckpointPages, WALFrames, Checkpoint).
// Call it before the writer connection is handed to the actor (which then
// holds it for good).
func (s *Store) SetWALAutocheckpoint(ctx context.Context, pages int) error {
	if s.Writer == nil {
		return Errorf(KindInternal, "the store was opened read-only")
	}
	if pages < 0 {
		return Errorf(KindInvalidRequest, "the WAL autocheckpoint is a number of pages, 0 or more (got %d)", pages)
	}
	if _, err := s.Writer.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
		return Internal(err)
	}
	var got int
	if err := s.Writer.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&got); err != nil {
		return Internal(err)
	}
	if got != 0 {
		return Errorf(KindInternal, "the writer's WAL autocheckpoint is %d after setting it to 0", got)
	}
	if s.ckpt != nil {
		s.ckpt.Close()
		s.ckpt, s.ckptPages = nil, 0
	}
	s.ckptLeft = pages == 0
	if pages == 0 {
		return nil
	}
	// A connection of its own, read-write (a query_only connection may not
	// checkpoint), synchronous=FULL like the writer's, so a checkpoint
	// syncs the WAL before it copies pages and the database file after.
	// It opens the sidecar through the held directory and never creates it.
	c, err := sql.Open("sqlite", openMode(s.file(), "rw", "busy_timeout(5000)", "synchronous(FULL)"))
	if err != nil {
		return Internal(err)
	}
	holdOneConn(c)
	if _, _, err := walCheckpoint(ctx, c, "NOOP"); err != nil {
		c.Close()
		return err
	}
	s.ckpt, s.ckptPages = c, pages
	return nil
}

// CheckpointsLeftToOthers reports that ce runs no checkpoint at all on
// this sidecar (SetWALAutocheckpoint(0): Litestream does), so ce compact
// through the room leaves the WAL as it is.
func (s *Store) CheckpointsLeftToOthers() bool { return s.ckptLeft }

// CheckpointPages is how many WAL pages not yet in the database file call
// for a checkpoint on the store's checkpoint connection; 0 means this
// store has none (its writer checkpoints as SQLite does by default, or
// nothing does: SetWALAutocheckpoint(0)).
func (s *Store) CheckpointPages() int { return s.ckptPages }

// WALFrames is how many frames (pages) the WAL holds and how many of them
// are in the database file already. It only reads the WAL index (PRAGMA
// wal_checkpoint(NOOP)), so it is cheap enough to ask after every commit.
func (s *Store) WALFrames(ctx context.Context) (log, done int, err error) {
	if s.ckpt == nil {
		return 0, 0, Errorf(KindInternal, "the store has no checkpoint connection")
	}
	return walCheckpoint(ctx, s.ckpt, "NOOP")
}

// Checkpoint runs a PASSIVE checkpoint on the store's checkpoint
// connection: it copies into the database file what no reader still needs
// from the WAL, without waiting for or blocking the writer or a reader. It
// returns how many pages it found in the WAL and how many of them are now
// in the database file.
func (s *Store) Checkpoint(ctx context.Context) (log, done int, err error) {
	if s.ckpt == nil {
		return 0, 0, Errorf(KindInternal, "the store has no checkpoint connection")
	}
	return walCheckpoint(ctx, s.ckpt, "PASSIVE")
}

func walCheckpoint(ctx context.Context, db *sql.DB, mode string) (log, done int, err error) {
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
		return 0, 0, Internal(err)
	}
	return log, done, nil
}
