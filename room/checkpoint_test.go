package room_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// walView reads a sidecar's WAL from a connection of the test's own:
// how many frames the WAL holds and how many of them are in the database
// file (PRAGMA wal_checkpoint(NOOP) checkpoints nothing).
type walView struct {
	tb testing.TB
	db *sql.DB
}

func openWALView(tb testing.TB, sidecar string) *walView {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+sidecar+"?_pragma=busy_timeout(5000)")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return &walView{tb: tb, db: db}
}

func (w *walView) frames() (log, done int) {
	w.tb.Helper()
	var busy int
	if err := w.db.QueryRow("PRAGMA wal_checkpoint(NOOP)").Scan(&busy, &log, &done); err != nil {
		w.tb.Fatal(err)
	}
	return log, done
}

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	st, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}

// Once --wal-autocheckpoint is set, the writer connection never
// checkpoints (SQLite's automatic checkpoint would run inside its COMMIT):
// with N > 0 a checkpointer on a connection of its own keeps the WAL
// bounded, with 0 nothing checkpoints at all (Litestream does).
func TestWALCheckpoints(t *testing.T) {
	t.Run("the_writer_connection_never_checkpoints_itself", func(t *testing.T) {
		for _, pages := range []int{0, 64, 1000} {
			ctx := context.Background()
			st, err := room.OpenStore(ctx, filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SetWALAutocheckpoint(ctx, pages); err != nil {
				t.Fatal(err)
			}
			var got int
			if err := st.Writer.QueryRow("PRAGMA wal_autocheckpoint").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != 0 || st.CheckpointPages() != pages {
				t.Errorf("--wal-autocheckpoint %d: the writer's wal_autocheckpoint is %d (want 0), the checkpointer's threshold %d",
					pages, got, st.CheckpointPages())
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a_negative_value_is_refused", func(t *testing.T) {
		ctx := context.Background()
		st, err := room.OpenStore(ctx, filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		wantKind(t, st.SetWALAutocheckpoint(ctx, -1), room.KindInvalidRequest)
	})

	const pages = 64
	// stream runs handoff lifecycles from four callers at once, each step
	// its own command, so the writer commits batch after batch while the
	// checkpointer works beside it.
	stream := func(t *testing.T, e *env, lifecycles int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for c := range 4 {
			owner := e.join(fmt.Sprintf("owner-%d", c), agentCaps...)
			worker := e.join(fmt.Sprintf("worker-%d", c), agentCaps...)
			approver := e.join(fmt.Sprintf("approver-%d", c), room.CapRead, room.CapApprove)
			wg.Go(func() {
				for i := range lifecycles / 4 {
					res, err := e.create(owner, room.CreateHandoffInput{Summary: fmt.Sprintf("caller %d, handoff %d", c, i)})
					if err == nil {
						id := res.Handoff.HandoffID
						if _, err = e.accept(worker, id); err == nil {
							if _, err = e.complete(worker, id, room.ResultInput{Text: "done"}); err == nil {
								_, err = e.approve(approver, id, "")
							}
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	const lifecycles = 160
	t.Run("0_checkpoints_nothing", func(t *testing.T) {
		e := newEnv(t, withWALAutocheckpoint(0))
		db := room.SidecarPath(e.doc)
		w := openWALView(t, db)
		dbBefore := fileSize(t, db)
		stream(t, e, lifecycles)
		log, done := w.frames()
		if dbAfter := fileSize(t, db); dbAfter != dbBefore || done != 0 || e.r.Stats().Checkpoints.Load() != 0 {
			t.Errorf("something checkpointed: the database file went from %d to %d bytes, %d of %d WAL frames are in it, %d checkpoints",
				dbBefore, dbAfter, done, log, e.r.Stats().Checkpoints.Load())
		}
		if log < 10*pages {
			t.Fatalf("the stream wrote only %d WAL frames; the test needs many times %d", log, pages)
		}
	})
	t.Run("N_keeps_the_WAL_bounded_and_the_checkpointer_does_it", func(t *testing.T) {
		e := newEnv(t, withWALAutocheckpoint(pages))
		db := room.SidecarPath(e.doc)
		dbBefore := fileSize(t, db)
		stream(t, e, lifecycles)
		wal := fileSize(t, db+"-wal")
		if n := e.r.Stats().Checkpoints.Load(); n == 0 {
			t.Errorf("the checkpointer ran no checkpoint")
		}
		if dbAfter := fileSize(t, db); dbAfter <= dbBefore {
			t.Errorf("the database file did not grow (%d → %d bytes): nothing was checkpointed into it", dbBefore, dbAfter)
		}
		// What the stream wrote, as the checkpointer counted it: without
		// checkpoints the WAL would hold all of it.
		frames := int64(e.r.Stats().WALFrames.Load())
		if frames < 10*pages {
			t.Fatalf("the stream wrote only %d WAL frames; the test needs many times %d", frames, pages)
		}
		if unbounded := frames * (4096 + 24); wal*3 > unbounded {
			t.Errorf("the WAL grew to %d bytes; the stream wrote %d frames (%d bytes)", wal, frames, unbounded)
		}
	})
}
