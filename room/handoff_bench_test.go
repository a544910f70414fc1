package room_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// BenchmarkHandoffLifecycle runs whole lifecycles (create → accept → complete
// → approve) through the real actor on a real sidecar file, from 1 and from 32
// concurrent callers (32 is the active-task cap, so every caller always has
// a slot). It reports lifecycles per second and the p99 latency of each step
// (and p50, for context) as the caller sees it: queueing, group commit and
// fsync included.
func BenchmarkHandoffLifecycle(b *testing.B) {
	steps := []string{"create", "accept", "complete", "approve"}
	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			e := newEnv(b, withRealClock())
			owner := e.join("owner", agentCaps...)
			worker := e.join("worker", agentCaps...)
			approver := e.join("approver", room.CapRead, room.CapApprove)
			lat := make([][][]time.Duration, callers) // caller → step → samples
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range callers {
				lat[i] = make([][]time.Duration, len(steps))
				wg.Add(1)
				go func() {
					defer wg.Done()
					timed := func(step int, f func() error) bool {
						t0 := time.Now()
						err := f()
						lat[i][step] = append(lat[i][step], time.Since(t0))
						if err != nil {
							b.Errorf("%s: %v", steps[step], err)
						}
						return err == nil
					}
					for next.Add(1) <= int64(b.N) {
						var id string
						ok := timed(0, func() error {
							res, err := e.create(owner, room.CreateHandoffInput{Summary: "benchmark work"})
							id = res.Handoff.HandoffID
							return err
						}) && timed(1, func() error {
							_, err := e.accept(worker, id)
							return err
						}) && timed(2, func() error {
							_, err := e.complete(worker, id, room.ResultInput{Text: "done"})
							return err
						}) && timed(3, func() error {
							_, err := e.approve(approver, id, "")
							return err
						})
						if !ok {
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lifecycles/s")
			for s, name := range steps {
				var all []time.Duration
				for i := range callers {
					all = append(all, lat[i][s]...)
				}
				if len(all) == 0 {
					continue
				}
				slices.Sort(all)
				pct := func(p int) float64 { return float64(all[min(len(all)-1, len(all)*p/100)].Microseconds()) / 1000 }
				b.ReportMetric(pct(50), name+"-p50-ms")
				b.ReportMetric(pct(99), name+"-p99-ms")
			}
		})
	}
}
