package actor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// A command runs without a savepoint while it is the first in its
// transaction; failing, it rolls the transaction back and the next command
// opens another. Wherever the failures fall in a batch, each failed command
// leaves nothing and every other command commits.
func TestBatch_FailuresRollBackOnlyThemselvesWhereverTheyFall(t *testing.T) {
	cases := []struct {
		name     string
		n        int
		failing  []int
		maxBatch int
	}{
		{"the only command fails", 1, []int{0}, 0},
		{"the first of three fails", 3, []int{0}, 0},
		{"the first two of three fail", 3, []int{0, 1}, 0},
		{"the last of three fails", 3, []int{2}, 0},
		{"the first and the last of four fail", 4, []int{0, 3}, 0},
		{"without group commit, the first of three fails", 3, []int{0}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := openRoom(t, func(cfg *Config) { cfg.MaxBatch = c.maxBatch })
			ctx := context.Background()
			op := room.Operator(tr.Engine().HostID)
			before := count(t, tr, `SELECT count(*) FROM invites`)
			eventsBefore := len(tr.pub.events(t))

			release := block(t, tr.Room)
			errs := make([]error, c.n)
			var wg sync.WaitGroup
			for i := range c.n {
				fails := slices.Contains(c.failing, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = Do(ctx, tr.Room, fmt.Sprint("cmd", i), func(tx *room.Tx) (struct{}, error) {
						// Every command writes an invite and its event.
						if _, err := tr.Engine().CreateInvite(tx, op, room.InviteInput{}); err != nil {
							return struct{}{}, err
						}
						if fails {
							return struct{}{}, room.Errorf(room.KindInvalidRequest, "deliberate failure")
						}
						return struct{}{}, nil
					})
				}()
				waitQueued(t, tr.Room, i+1) // queued in order: the batch runs them in order
			}
			release()
			wg.Wait()
			barrier(t, tr.Room)

			for i, err := range errs {
				if slices.Contains(c.failing, i) {
					if room.ErrorKind(err) != room.KindInvalidRequest {
						t.Errorf("command %d: got %v, want its own invalid_request", i, err)
					}
				} else if err != nil {
					t.Errorf("healthy command %d failed: %v", i, err)
				}
			}
			want := c.n - len(c.failing)
			if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != want {
				t.Errorf("invites added = %d, want %d", got, want)
			}
			if got := len(tr.pub.events(t)) - eventsBefore; got != want {
				t.Errorf("events published = %d, want %d (nothing from the failed commands)", got, want)
			}
			// The writer is healthy afterwards: no transaction left open.
			if _, err := invite(ctx, tr.Room); err != nil {
				t.Fatalf("a command after the batch: %v", err)
			}
			if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != want+1 {
				t.Errorf("invites after one more = %d, want %d", got, want+1)
			}
		})
	}
}
