package room

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// OnDisk is the sidecar's size as files: its database file and its WAL
// (0 when there is none), stat-ed in the directory the store holds, so a
// moved room still reports its own files. /metrics shows them, so an
// operator sees a WAL that checkpoints no longer shrink.
func (s *Store) OnDisk() (dbBytes, walBytes int64, err error) {
	base := filepath.Base(s.Path)
	st, err := os.Stat(s.dir.name(base))
	if err != nil {
		return 0, 0, err
	}
	if w, werr := os.Stat(s.dir.name(base + "-wal")); werr == nil {
		walBytes = w.Size()
	}
	return st.Size(), walBytes, nil
}

// Check says whether the sidecar is still usable from outside the writer:
// its file is still in the directory the store holds (a sidecar deleted
// under a running room keeps working on its open descriptors, and loses
// everything at the next restart) and one trivial read succeeds. Readiness
// asks it.
func (s *Store) Check(ctx context.Context) error {
	if _, err := os.Stat(s.dir.name(filepath.Base(s.Path))); err != nil {
		return fmt.Errorf("the sidecar file is gone: %w", err)
	}
	var one int
	if err := s.Reader.QueryRowContext(ctx, "SELECT 1 FROM sqlite_schema LIMIT 1").Scan(&one); err != nil {
		return fmt.Errorf("the sidecar cannot be read: %w", err)
	}
	return nil
}
