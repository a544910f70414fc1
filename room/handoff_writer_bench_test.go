package room_test

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// lifecycleSteps are the four writer commands of a handoff's happy path.
var lifecycleSteps = []string{"create", "accept", "complete", "approve"}

// writerCost is what the writer has spent so far: its thread's CPU, the
// statements it ran and its turns, with the process's heap allocations.
type writerCost struct{ cpu, stmts, cmds, allocs, frames, batches uint64 }

func readCost(r *actor.Room) writerCost {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	st := r.Stats()
	return writerCost{cpu: st.CPUNanos.Load(), stmts: st.Statements.Load(), cmds: st.Commands.Load(), allocs: s[0].Value.Uint64(),
		frames: st.WALFrames.Load(), batches: st.Batches.Load()}
}

func (c writerCost) sub(o writerCost) writerCost {
	return writerCost{c.cpu - o.cpu, c.stmts - o.stmts, c.cmds - o.cmds, c.allocs - o.allocs, c.frames - o.frames, c.batches - o.batches}
}

// stopCost reports the writer's cost per command (and per batch) since
// start, once the writer has finished its last turn (the turn's CPU is
// counted when the writer re-arms).
func stopCost(b *testing.B, r *actor.Room, start writerCost) writerCost {
	for r.Queued() > 0 {
		runtime.Gosched()
	}
	total := readCost(r).sub(start)
	cmds := float64(max(total.cmds, 1))
	batches := float64(max(total.batches, 1))
	b.ReportMetric(float64(total.cpu)/cmds, "writer-cpu-ns/cmd")
	b.ReportMetric(float64(total.stmts)/cmds, "stmts/cmd")
	b.ReportMetric(float64(total.allocs)/cmds, "allocs/cmd")
	b.ReportMetric(cmds/batches, "cmds/batch")
	b.ReportMetric(float64(total.frames)/cmds, "wal-frames/cmd")
	b.ReportMetric(float64(total.frames)/batches, "wal-frames/batch")
	return total
}

// waitTurn waits until the writer has finished (and counted) the turn that
// ran the command just answered: it answers before re-arming its sweeper.
func waitTurn(r *actor.Room, before uint64) {
	for r.Stats().Turns.Load() <= before {
		runtime.Gosched()
	}
}

// BenchmarkLifecycleWriter measures what the writer pays for a handoff
// lifecycle command (create, accept, complete, approve through the real actor
// on a real sidecar, synchronous=FULL): the CPU of the writer's own thread
// (Stats.CPUNanos), the SQL statements it runs, and the process's heap
// allocations, each per command. These do not depend on how loaded the
// machine is, so a regression shows in a diff where wall time would not.
// wal-frames/cmd and wal-frames/batch are the pages the commits appended to
// the WAL (each is two pwrites in COMMIT and a page a checkpoint copies),
// as the checkpointer counts them (the last batch's may be missing).
//
//   - callers=1 runs one command per transaction and breaks the cost down
//     by step (<step>-cpu-ns, <step>-stmts, <step>-allocs).
//
//   - callers=32 with group commit (max-batch 64) and without (max-batch 1)
//     gives the cost per command as the bench's lifecycle scenarios load it.
//
//   - callers=64/room-mix adds what the room's batches also carry: refused
//     creates under the room's caps (benchLifecycleRoomMix).
//
//     go test -run '^$' -bench LifecycleWriter -benchtime 2000x -count 5 ./room
func BenchmarkLifecycleWriter(b *testing.B) {
	// The writer as a room runs it: its copies of handoffs are used, not
	// checked against the rows as this package's tests check them.
	room.SetVerifyWriterCache(false)
	defer room.SetVerifyWriterCache(true)
	b.Run("callers=1", func(b *testing.B) { benchLifecycleWriter(b, 1, 0) })
	b.Run("callers=32/group", func(b *testing.B) { benchLifecycleWriter(b, 32, 64) })
	b.Run("callers=32/max-batch=1", func(b *testing.B) { benchLifecycleWriter(b, 32, 1) })
	b.Run("callers=64/room-mix", benchLifecycleRoomMix)
}

func benchLifecycleWriter(b *testing.B, callers, maxBatch int) {
	// Every caller always has a slot: the share is the room's cap, and
	// there are never more callers than the cap.
	// The sidecar is checkpointed as ce serve's default does it
	// (--wal-autocheckpoint 4000).
	e := newEnv(b, withRealClock(), withMaxBatch(maxBatch), withWALAutocheckpoint(4000), withLimits(func(l *room.Limits) {
		l.MaxTasksPerParticipant = l.MaxActiveTasks
	}))
	owner := e.join("owner", agentCaps...)
	worker := e.join("worker", agentCaps...)
	approver := e.join("approver", room.CapRead, room.CapApprove)
	run := []func(id *string) error{
		func(id *string) error {
			res, err := e.create(owner, room.CreateHandoffInput{Summary: "benchmark work"})
			*id = res.Handoff.HandoffID
			return err
		},
		func(id *string) error { _, err := e.accept(worker, *id); return err },
		func(id *string) error { _, err := e.complete(worker, *id, room.ResultInput{Text: "done"}); return err },
		func(id *string) error { _, err := e.approve(approver, *id, ""); return err },
	}
	perStep := make([]writerCost, len(lifecycleSteps))
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := readCost(e.r)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				var id string
				for s, step := range run {
					var before writerCost
					var turns uint64
					if callers == 1 {
						turns = e.r.Stats().Turns.Load()
						before = readCost(e.r)
					}
					if err := step(&id); err != nil {
						b.Errorf("%s: %v", lifecycleSteps[s], err)
						return
					}
					if callers == 1 {
						waitTurn(e.r, turns)
						d := readCost(e.r).sub(before)
						perStep[s].cpu += d.cpu
						perStep[s].stmts += d.stmts
						perStep[s].allocs += d.allocs
						perStep[s].cmds++
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	stopCost(b, e.r, start)
	if callers == 1 {
		for s, name := range lifecycleSteps {
			n := float64(max(perStep[s].cmds, 1))
			b.ReportMetric(float64(perStep[s].cpu)/n, name+"-cpu-ns")
			b.ReportMetric(float64(perStep[s].stmts)/n, name+"-stmts")
			b.ReportMetric(float64(perStep[s].allocs)/n, name+"-allocs")
		}
	}
}
