package room

import (
	"context"
	"fmt"
	"os"
)

// Check says whether the sidecar is still usable from outside the writer:
// its file is still in the directory the store holds (a sidecar deleted
// under a running room keeps working on its open descriptors, and loses
// everything at the next restart) and one trivial read succeeds. Readiness
// asks it.
func (s *Store) Check(ctx context.Context) error {
	if _, err := os.Stat(s.file()); err != nil {
		return fmt.Errorf("the sidecar file is gone: %w", err)
	}
	var one int
	if err := s.Reader.QueryRowContext(ctx, "SELECT 1 FROM sqlite_schema LIMIT 1").Scan(&one); err != nil {
		return fmt.Errorf("the sidecar cannot be read: %w", err)
	}
	return nil
}
