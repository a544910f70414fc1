package room_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// benchLifecycleRoomMix loads the writer the way the bench's lifecycle
// scenario loads a room, so the writer's figures here can be set beside
// the room's: 64 callers, each with a creator, a worker and an approver of
// its own, under the room's default caps (32 live tasks), so about half the
// callers wait at any time and their creates are refused with
// limit_exceeded; a refused caller pauses 2-5 ms and tries again, as the
// bench's agents do. Refused creates are commands too (each rolls back to
// its savepoint): refused/cmd says what share of the commands they are.
// What the room has and this does not: authentication and the session-use
// flush, the MCP door's allocations in the same heap (GC assists), and the
// readers.
func benchLifecycleRoomMix(b *testing.B) {
	const callers = 64
	// The bench's room: room-wide session caps lifted (ce serve
	// --max-sessions 512 --max-sessions-per-invite 512), the task caps as
	// they are, checkpoints as ce serve's default (--wal-autocheckpoint 4000).
	e := newEnv(b, withRealClock(), withWALAutocheckpoint(4000), withLimits(func(l *room.Limits) {
		l.MaxLiveSessions, l.MaxSessionsPerInvite = 512, 512
	}))
	agents := lifecycleAgents(e, callers)
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := readCost(e.r)
	for i := range callers {
		a := agents[i]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 17))
			for next.Add(1) <= int64(b.N) {
				var id string
				for {
					res, err := e.create(a.creator, room.CreateHandoffInput{Summary: "benchmark work"})
					if err == nil {
						id = res.Handoff.HandoffID
						break
					}
					if room.ErrorKind(err) != room.KindLimitExceeded {
						b.Errorf("create: %v", err)
						return
					}
					refused.Add(1)
					time.Sleep(2*time.Millisecond + time.Duration(rng.IntN(3000))*time.Microsecond)
				}
				if err := a.finish(e, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	total := stopCost(b, e.r, start)
	b.ReportMetric(float64(refused.Load())/float64(max(total.cmds, 1)), "refused/cmd")
}

// lifecycleAgent is one of a lifecycle benchmark's callers: who creates,
// who does the work, who approves.
type lifecycleAgent struct{ creator, worker, approver room.Principal }

// lifecycleAgents joins n agents, each a creator, a worker and an approver
// with only the capabilities their step needs.
func lifecycleAgents(e *env, n int) []lifecycleAgent {
	agents := make([]lifecycleAgent, n)
	for i := range agents {
		agents[i] = lifecycleAgent{
			creator:  e.join(fmt.Sprintf("creator-%d", i), room.CapRead, room.CapPropose),
			worker:   e.join(fmt.Sprintf("worker-%d", i), room.CapRead, room.CapCheckout),
			approver: e.join(fmt.Sprintf("approver-%d", i), room.CapRead, room.CapApprove),
		}
	}
	return agents
}

// finish takes handoff id from created to approved: accept, complete,
// approve, and names the step that failed.
func (a lifecycleAgent) finish(e *env, id string) error {
	if _, err := e.accept(a.worker, id); err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	if _, err := e.complete(a.worker, id, room.ResultInput{Text: "done"}); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if _, err := e.approve(a.approver, id, ""); err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	return nil
}
