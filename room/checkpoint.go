package room

import (
	"context"
	"strconv"
)

// SetWALAutocheckpoint sets after how many WAL pages the writer connection
// checkpoints on its own after a commit (SQLite's default is 1000). 0 turns
// ce's own checkpoints off, for a room whose sidecar Litestream replicates:
// Litestream's documentation asks the application to leave checkpoints to
// it under write load, since a checkpoint that restarts the WAL between two
// of its syncs forces it to take a full snapshot. Call it before the writer
// connection is handed to the actor (which then holds it for good).
func (s *Store) SetWALAutocheckpoint(ctx context.Context, pages int) error {
	if s.Writer == nil {
		return Errorf(KindInternal, "the store was opened read-only")
	}
	if pages < 0 {
		return Errorf(KindInvalidRequest, "the WAL autocheckpoint is a number of pages, 0 or more (got %d)", pages)
	}
	if _, err := s.Writer.ExecContext(ctx, "PRAGMA wal_autocheckpoint = "+strconv.Itoa(pages)); err != nil {
		return Internal(err)
	}
	var got int
	if err := s.Writer.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&got); err != nil {
		return Internal(err)
	}
	if got != pages {
		return Errorf(KindInternal, "the WAL autocheckpoint is %d after setting it to %d", got, pages)
	}
	return nil
}
