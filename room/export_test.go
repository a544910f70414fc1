package room

import (
	"context"
	"database/sql"
	"testing"
)

// Test seams of the guarded replace and of a commit, reachable from this
// package's external tests only (this file is compiled into tests alone).
// Call them from inside a command, on the writer goroutine.

// SetSwapHook runs f at the named points of every document replacement:
// "read" (before the document is read for the check), "swap" (after the
// check, right before the new file is swapped in) and "swapped" (after the
// file that left the document's name was read, before it is unlinked).
func SetSwapHook(e *Engine, f func(stage string)) { e.file.swapHook = f }

// SetNoExchange makes replacements use the check-then-rename fallback, as
// where RENAME_EXCHANGE is missing.
func SetNoExchange(e *Engine, on bool) { e.file.noExchange = on }

// SetAfterFileWrite installs a hook that runs right after the document has
// been renamed into place and before the version row is written: a hook
// error stands for a crash between the file write and COMMIT. Production
// rooms leave it nil, so it lives here rather than in the Engine's API. Set
// it before sending commands.
func SetAfterFileWrite(e *Engine, f func() error) { e.afterFileWrite = f }

// MigrateTo writes a sidecar at dbPath at schema version n (its migrations
// 1..n only), the way an older ce left it, so a test can open it with this
// build and check the migrations after n.
func MigrateTo(ctx context.Context, dbPath string, n int) error {
	db, err := sql.Open("sqlite", dsn(dbPath, "foreign_keys(ON)"))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, m := range migrations()[:n] {
		if err := applyMigration(ctx, conn, m); err != nil {
			return err
		}
	}
	return nil
}

// Every use of the writer's copy of a handoff in this package's tests is
// compared with the row it stands for (handoff_wcache.go): any test that
// leaves the copy stale fails its command with the difference.
func init() { verifyWriterCache = true }

// WriterCopiesUsed is how many lifecycle steps started from the writer's
// copy of their handoff instead of reading it. Read it after a command has
// answered (the answer orders it after the writer's update).
func WriterCopiesUsed(e *Engine) uint64 { return e.wc.used }

// SetVerifyWriterCache turns the comparison of every copy with its row off
// (benchmarks, which measure the writer as it runs in a room) or on.
func SetVerifyWriterCache(on bool) { verifyWriterCache = on }

// WriterLiveCountsUsed is how many creates counted the live tasks from the
// writer's set instead of the statement (task_live_wcache.go).
func WriterLiveCountsUsed(e *Engine) uint64 { return e.wc.live.used }

// VisibleHistoryQuery is the statement History runs for p, a caller who
// does not see every handoff, with its arguments (since: after event 0).
func VisibleHistoryQuery(p Principal, since bool) (string, []any) {
	q := visibleHistoryQuery(since, p.Caps.Has(CapCheckout), pageLimit(50))
	if since {
		return q, []any{p.ParticipantID, int64(0)}
	}
	return q, []any{p.ParticipantID}
}

// QueryPlan is SQLite's plan for query on q, one detail line per step.
func QueryPlan(t *testing.T, q Querier, query string, args ...any) []string {
	return queryPlan(t, q, query, args...)
}
