package actor

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/commonroom/ce/room"
)

// warmCodecs opens a room once outside any synctest bubble, so the
// version store's shared zstd codec (made on first use, with channels of
// its own) belongs to no bubble and every bubble may use it.
var warmCodecs sync.Once

func warmOutsideBubble(t *testing.T) {
	warmCodecs.Do(func() { openRoom(t, nil) })
}

// TestPrune_TheSweeperPrunesInBoundedTurnsWhenTheWindowPasses runs in a
// synctest bubble (fake time, no sleeping): with a 24 h window and a
// budget of 2, five cancelled handoffs are left alone until the window
// passes, then pruned by the sweeper's own timer in three turns of at most
// two, one right after another; after that the sweeper waits PruneEvery.
// (The budget per turn is the engine's, checked by room's
// TestPrune_PruneTurnsAreBounded.)
func TestPrune_TheSweeperPrunesInBoundedTurnsWhenTheWindowPasses(t *testing.T) {
	warmOutsideBubble(t)
	synctest.Test(t, func(t *testing.T) {
		tr := openRoom(t, func(c *Config) {
			c.Engine.Retention = room.Retention{Handoffs: 24 * time.Hour}
			c.PruneEvery = 10 * time.Minute
			c.PruneBudget = 2
			c.MaxSweepWait = 6 * time.Hour
		})
		ctx := context.Background()
		_, p := join(t, tr)
		for i := 0; i < 5; i++ {
			res, err := Do(ctx, tr.Room, "create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
				return tr.Engine().CreateHandoff(tx, p, room.CreateHandoffInput{Summary: "s"})
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Do(ctx, tr.Room, "cancel", func(tx *room.Tx) (room.Empty, error) {
				return tr.Engine().CancelTask(tx, p, room.TaskIDInput{TaskID: res.Task.TaskID})
			}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got, want := tr.NextWake(), time.Now().Add(10*time.Minute); got.After(want.Add(time.Second)) {
			t.Fatalf("sweeper armed for %v, want the next prune look by %v", got, want)
		}
		time.Sleep(23 * time.Hour)
		synctest.Wait()
		if n := count(t, tr, `SELECT count(*) FROM handoffs`); n != 5 {
			t.Fatalf("%d handoffs left inside the window, want 5", n)
		}
		turns := tr.Stats().PruneTurns.Load()
		time.Sleep(time.Hour + 10*time.Minute)
		synctest.Wait()
		if n := count(t, tr, `SELECT count(*) FROM handoffs`); n != 0 {
			t.Fatalf("%d handoffs left after the window, want 0", n)
		}
		if got := tr.Engine().PruneTotals().Handoffs; got != 5 {
			t.Fatalf("the engine counted %d pruned handoffs, want 5", got)
		}
		// Seven looks every 10 minutes, and two more turns right after the
		// one that found five (2 + 2 + 1).
		if n := tr.Stats().PruneTurns.Load() - turns; n < 3 || n > 9 {
			t.Fatalf("%d prune turns, want 3 to 9", n)
		}
		if got, want := tr.NextWake(), time.Now().Add(10*time.Minute); got.After(want.Add(time.Second)) || got.Before(want.Add(-10*time.Minute)) {
			t.Fatalf("after pruning the sweeper is armed for %v, want the next look by %v", got, want)
		}
		tr.Close(ctx)
		tr.store.Close()
	})
}

// TestPrune_WithoutAPolicyTheSweeperNeverPrunes: the default keeps
// everything, and the sweeper is not woken for it.
func TestPrune_WithoutAPolicyTheSweeperNeverPrunes(t *testing.T) {
	warmOutsideBubble(t)
	synctest.Test(t, func(t *testing.T) {
		tr := openRoom(t, func(c *Config) { c.MaxSweepWait = 6 * time.Hour })
		synctest.Wait()
		if got, want := tr.NextWake(), time.Now().Add(6*time.Hour); got.Before(want.Add(-time.Second)) {
			t.Fatalf("idle sweeper armed for %v, want the cap %v", got, want)
		}
		time.Sleep(400 * 24 * time.Hour)
		synctest.Wait()
		if n := tr.Stats().PruneTurns.Load(); n != 0 {
			t.Fatalf("%d prune turns without a policy", n)
		}
		c, err := tr.Prune(context.Background())
		if err != nil || c != (room.PruneCounts{}) {
			t.Fatalf("Prune without a policy: %+v, %v", c, err)
		}
		tr.Close(context.Background())
		tr.store.Close()
	})
}
