package actor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// BenchmarkCommit measures durable commits (synchronous=FULL) through the
// actor: one invitation (a row and its event) per command, with one command
// per transaction against group commit, for 1 and 64 concurrent callers.
// It reports commands/s and the p50/p99 latency a caller sees.
func BenchmarkCommit(b *testing.B) {
	for _, mode := range []struct {
		name  string
		batch int
	}{{"one-per-tx", 1}, {"group", 64}} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode.name, callers), func(b *testing.B) {
				benchCommit(b, mode.batch, callers, false)
			})
		}
	}
}

// BenchmarkCommitWatched is the file watcher's price on the commit path:
// every commit writes the sidecar's -wal beside the document, and each
// write is an event the watcher must receive and drop. It compares one
// caller's commits with the watcher off and on, and reports the process's
// CPU time per commit (less sensitive than wall time to a shared machine)
// and the events dropped per commit.
func BenchmarkCommitWatched(b *testing.B) {
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("watch=%v", watch), func(b *testing.B) {
			benchCommit(b, 1, 1, watch)
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchCommit(b *testing.B, maxBatch, callers int, watch bool) {
	dir := b.TempDir()
	doc := filepath.Join(dir, "bench.md")
	os.WriteFile(doc, []byte("# Bench\n"), 0o644)
	ctx := context.Background()
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		b.Fatal(err)
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r, err := Open(ctx, Config{Engine: eng, Store: st, MaxBatch: maxBatch, QueueLen: 4096, Watch: WatchConfig{Enabled: watch}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	op := room.Operator(eng.HostID)
	unlimited := 0
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				_, err := Do(ctx, r, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
					return eng.CreateInvite(tx, op, room.InviteInput{MaxUses: &unlimited})
				})
				if err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(r.Stats().Commands.Load())/float64(max(r.Stats().Batches.Load(), 1)), "cmds/batch")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/commit")
	if watch {
		b.ReportMetric(float64(r.Stats().WatchIgnored.Load())/float64(len(all)), "dropped-events/commit")
	}
}
