package actor

import (
	"context"

	"github.com/commonroom/ce/room"
)

// ReadRecord runs fn on the read pool outside any transaction, each
// statement on a pooled connection with a statement prepared once. It is for
// reads that are a single statement about records the Markdown file does
// not decide (a handoff, a task): one statement is one snapshot without a
// BEGIN and a ROLLBACK around it, and such a read has no reason to look at
// the document file first as Read does. A read of two statements must use
// Read, or the two may see different commits.
func ReadRecord[T any](ctx context.Context, r *Room, fn func(q room.Querier) (T, error)) (T, error) {
	return fn(r.reads.Pool())
}
