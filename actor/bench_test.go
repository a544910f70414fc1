package actor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
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
				benchCommit(b, mode.batch, callers)
			})
		}
	}
}

func benchCommit(b *testing.B, maxBatch, callers int) {
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
	r, err := Open(ctx, Config{Engine: eng, Store: st, MaxBatch: maxBatch, QueueLen: 4096})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	op := room.Operator(eng.HostID)
	unlimited := 0
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
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
	elapsed := time.Since(start)
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
}
