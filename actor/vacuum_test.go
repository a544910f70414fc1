package actor

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// exec runs statements as one command of the writer.
func exec(t *testing.T, r *Room, stmts ...string) {
	t.Helper()
	_, err := Do(context.Background(), r, "test", func(tx *room.Tx) (struct{}, error) {
		for _, s := range stmts {
			if _, err := tx.Querier().ExecContext(tx.Context(), s); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// freePages leaves about n free pages spread over the sidecar: rows of a
// table of their own, every other one and the older half deleted.
func freePages(t *testing.T, r *Room, n int) {
	t.Helper()
	exec(t, r,
		`CREATE TABLE IF NOT EXISTS filler(id INTEGER PRIMARY KEY, b BLOB)`,
		`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < `+strconv.Itoa(n*4/3)+`) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`)
	exec(t, r, `DELETE FROM filler WHERE id % 2 = 0 OR id < (SELECT max(id) FROM filler) / 2`)
}

func space(t *testing.T, tr *testRoom) room.Space {
	t.Helper()
	sp, err := tr.Space(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// waitFor waits (yielding, no sleeps) until cond holds, or fails after a
// generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		runtime.Gosched()
	}
}

// TestIdleWriterGivesFreePagesBackInSmallSteps: once a sweep finds more
// free pages than the threshold, the writer gives them all back on its
// own, in steps of at most VacuumStepPages each, and the database file
// shrinks at the next checkpoint. Below the threshold it leaves them.
func TestIdleWriterGivesFreePagesBackInSmallSteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int
		gives     bool
	}{
		{"above_the_threshold_every_free_page_is_given_back", 100, true},
		{"below_the_threshold_free_pages_are_left_for_reuse", 100_000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const step = 16
			tr := openRoom(t, func(c *Config) { c.VacuumStepPages, c.VacuumFreePages = step, tc.threshold })
			freePages(t, tr.Room, 600)
			before := space(t, tr)
			if before.FreePages < 300 {
				t.Fatalf("only %d free pages to give back", before.FreePages)
			}
			sweeps := tr.Stats().Sweeps.Load()
			tr.RequestSweep()
			waitFor(t, "the sweep", func() bool { return tr.Stats().Sweeps.Load() > sweeps })
			if !tc.gives {
				// The sweep's turn has decided: no step is due. A command
				// after it proves the writer went back to its queue.
				barrier(t, tr.Room)
				if n := tr.Stats().VacuumSteps.Load(); n != 0 {
					t.Fatalf("%d steps ran below the threshold", n)
				}
				return
			}
			waitFor(t, "every free page given back", func() bool { return space(t, tr).FreePages == 0 })
			st := tr.Stats()
			// The room's own writes (the sweep's) may have reused a few.
			if got := st.VacuumPages.Load(); got < uint64(before.FreePages)*9/10 {
				t.Errorf("the steps counted %d pages given back, want about %d", got, before.FreePages)
			}
			// Each step gives back at most step pages: the steps' own count
			// (not the free pages before, some of which the sweep's writes
			// may have reused instead) bounds what they did.
			if steps, pages := st.VacuumSteps.Load(), st.VacuumPages.Load(); steps*step < pages {
				t.Errorf("%d steps of at most %d pages gave back %d pages", steps, step, pages)
			}
			if st.VacuumLongestNanos.Load() == 0 || st.VacuumFailed.Load() != 0 {
				t.Errorf("longest step %dns, %d failed", st.VacuumLongestNanos.Load(), st.VacuumFailed.Load())
			}
			// The room checkpoints past a threshold; one now makes the file
			// its new size at once.
			ck := checkpointNow(t, tr)
			after := space(t, tr)
			if !ck || after.DBBytes >= before.DBBytes-before.FreePages*before.PageSize/2 {
				t.Errorf("database file %d → %d bytes after giving back %d pages (checkpointed: %v)", before.DBBytes, after.DBBytes, before.FreePages, ck)
			}
		})
	}
}

// checkpointNow runs ce compact's last request, a truncating checkpoint,
// through the writer and reports whether it copied and emptied the WAL.
func checkpointNow(t *testing.T, tr *testRoom) bool {
	t.Helper()
	req, err := tr.ask(context.Background(), &vacuumReq{truncate: true})
	if err != nil || req.err != nil {
		t.Fatalf("checkpoint: %v %v", err, req.err)
	}
	return req.ok
}

// TestCompactGivesEveryFreePageBackWhileTheRoomServes: ce compact's steps
// run through the writer, commands keep being answered between them, and
// once done the WAL is checkpointed and emptied. A budget that runs out
// first answers "not done", and the next call goes on.
func TestCompactGivesEveryFreePageBackWhileTheRoomServes(t *testing.T) {
	ctx := context.Background()
	tr := openRoom(t, func(c *Config) { c.VacuumStepPages = -1 }) // no idle steps: only Compact's
	freePages(t, tr.Room, 600)
	before := space(t, tr)

	res, err := tr.Compact(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || res.Steps != 1 || res.PagesFreed != defaultVacuumStepPages {
		t.Fatalf("a compaction without budget: %+v, want one step of %d pages, not done", res, defaultVacuumStepPages)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var answered int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := invite(ctx, tr.Room); err != nil {
				t.Error(err)
				return
			}
			answered++
		}
	})
	res, err = tr.Compact(ctx, time.Minute)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	after := space(t, tr)
	// The commands committed after the checkpoint wrote a little WAL again.
	if !res.Done || !res.Checkpointed || after.FreePages != 0 || after.WALBytes >= before.WALBytes/4 {
		t.Errorf("compaction: %+v; after it %d free pages, WAL %d bytes (was %d)", res, after.FreePages, after.WALBytes, before.WALBytes)
	}
	// The commands answered meanwhile may have reused a few free pages.
	if res.PagesFreed+defaultVacuumStepPages < before.FreePages*9/10 || res.Longest <= 0 {
		t.Errorf("compaction gave back %d pages (+%d before), %d were free; longest step %v", res.PagesFreed, defaultVacuumStepPages, before.FreePages, res.Longest)
	}
	if after.DBBytes >= before.DBBytes-before.FreePages*before.PageSize/2 {
		t.Errorf("database file %d → %d bytes after the compaction", before.DBBytes, after.DBBytes)
	}
	if answered == 0 {
		t.Error("no command was answered while the compaction ran")
	}
	t.Logf("%d steps, longest %v, %d commands answered meanwhile", res.Steps, res.Longest, answered)
}

// TestCompactRefusals: one compaction at a time, none on a sidecar whose
// conversion did not happen (its free pages cannot be given back in
// steps), none once the room is stopping.
func TestCompactRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("a_second_compaction_is_refused_while_one_runs", func(t *testing.T) {
		tr := openRoom(t, func(c *Config) { c.VacuumStepPages = -1 })
		freePages(t, tr.Room, 200)
		release := block(t, tr.Room) // the first compaction waits for the writer
		first := make(chan error, 1)
		go func() { _, err := tr.Compact(ctx, time.Minute); first <- err }()
		waitFor(t, "the first compaction", tr.compacting.Load)
		// Refused at once; were it not, it would wait for the blocked
		// writer until this context ends.
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := tr.Compact(short, time.Minute)
		cancel()
		release()
		var re *room.Error
		if !errors.As(err, &re) || re.Kind != room.KindRoomBusy {
			t.Errorf("the second compaction: %v, want room_busy", err)
		}
		if err := <-first; err != nil {
			t.Errorf("the first compaction: %v", err)
		}
	})
	t.Run("a_sidecar_not_converted_is_refused", func(t *testing.T) {
		tr := openRoom(t, nil)
		tr.incremental = false // as when the conversion at start failed (see room's full-disk test)
		_, err := tr.Compact(ctx, time.Minute)
		var re *room.Error
		if !errors.As(err, &re) || re.Kind != room.KindInvalidRequest {
			t.Errorf("compaction: %v, want invalid_request", err)
		}
	})
	t.Run("a_stopped_room_is_refused", func(t *testing.T) {
		tr := openRoom(t, nil)
		tr.Close(ctx)
		_, err := tr.Compact(ctx, time.Minute)
		var re *room.Error
		if !errors.As(err, &re) || re.Kind != room.KindUnavailable {
			t.Errorf("compaction: %v, want unavailable", err)
		}
	})
}
