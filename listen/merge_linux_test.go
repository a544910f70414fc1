//go:build linux && (amd64 || arm64)

package listen

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// Batches published while a run is being written join it: the streams no
// writer has taken yet get them in the same write as the run's own frames,
// the streams already written get them first thing in the next run, and
// nobody gets a frame twice, out of order, or from before it took the
// topic. A batch that ends streams never joins a run being written: its
// ends still come after its frames and before any later batch's.
//
// The run is 2×fanOutSlice streams, few enough frames that the broadcaster
// writes them alone, one slice at a time, merging before each slice; the
// test publishes from the run's first write, so the first slice has been
// taken and the second has not.
func TestBatchesPublishedMidRunJoinTheRun(t *testing.T) {
	const n = 2 * fanOutSlice
	even := func(i int) bool { return i%2 == 0 }
	tests := []struct {
		name string
		// midRun publishes from the run's first write; late is a
		// subscription it takes meanwhile, if any.
		midRun func(h *Hub) (late *Subscription)
		// want is what stream i reads, and whether it then gets the final
		// frame of its session's end (before Close).
		want func(i int) (seqs []int, ended bool)
		// writes is how many frames each write carried, in any order.
		writes []int
		// lateWants is what the late subscription is queued.
		lateWants []int
	}{
		{
			name: "a batch published mid-run reaches the unwritten streams in the same write, the written ones once in the next run, and a stream subscribed meanwhile only what follows",
			midRun: func(h *Hub) *Subscription {
				h.Publish(Batch{Messages: []Message{msg("t", 2)}})
				late, err := h.Subscribe(SubscribeRequest{Topics: []string{"t"}})
				if err != nil {
					panic(err)
				}
				h.Publish(Batch{Messages: []Message{msg("t", 3)}})
				return late
			},
			want: func(int) ([]int, bool) { return []int{1, 2, 3}, false },
			// First slice: 1, then 2+3 in the next run; second slice:
			// 1+2+3 in one write.
			writes:    slices.Concat(repeat(1, n/2), repeat(2, n/2), repeat(3, n/2)),
			lateWants: []int{3},
		},
		{
			name: "a batch that ends streams waits for the next run, after its own frames and before later ones",
			midRun: func(h *Hub) *Subscription {
				var ends []string
				for i := range n {
					if even(i) {
						ends = append(ends, fmt.Sprint("s", i))
					}
				}
				h.Publish(Batch{Messages: []Message{msg("t", 2)}})
				h.Publish(Batch{Messages: []Message{msg("t", 3)}, EndSessions: ends})
				h.Publish(Batch{Messages: []Message{msg("t", 4)}})
				return nil
			},
			want: func(i int) ([]int, bool) {
				if even(i) {
					return []int{1, 2, 3}, true
				}
				return []int{1, 2, 3, 4}, false
			},
			// Run 1: first slice 1, second slice 1+2 (2 merged; 3 ends
			// streams, so it and 4 wait). Run 2: the first slice's 2 with
			// 3, the second slice's 3. Run 3: 4 to the streams left.
			writes: slices.Concat(repeat(1, n/2), repeat(2, n/2), repeat(2, n/2), repeat(1, n/2), repeat(1, n/2)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			g := newRunGate()
			var once sync.Once
			var late *Subscription
			var ts *testServer
			hk := g.hooks()
			hk.beforeBatch = nil
			record := hk.afterWrite
			hk.afterWrite = func(s *Subscription, frames int) {
				record(s, frames)
				once.Do(func() { late = tt.midRun(ts.hub) })
			}
			ts = newTestServerHooks(t, Config{MaxStreamsPerSession: -1}, hk)
			streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
				return fmt.Sprint("s", i), fmt.Sprint(i), []string{"t"}
			})
			for range n {
				select {
				case <-ts.returned: // detached: written by the pool
				case <-ctx.Done():
					t.Fatal("a handler never returned")
				}
			}
			ts.hub.Publish(Batch{Messages: []Message{msg("t", 1)}})
			ended := 0
			var frames uint64
			for i, c := range streams {
				seqs, end := tt.want(i)
				frames += uint64(len(seqs))
				if err := c.expectSeqs(seqs...); err != nil {
					t.Fatal(err)
				}
				if end {
					ended++
					if err := c.expectFinal(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range ended {
				if e := ts.waitEnd(ctx); e.reason != EndSessionEnded {
					t.Fatalf("stream %s ended with %v, want session ended", e.session, e.reason)
				}
			}
			ts.hub.Close() // the broadcaster has counted everything
			for i, c := range streams {
				if _, end := tt.want(i); !end {
					if err := c.expectFinal(); err != nil { // nothing twice, nothing more
						t.Fatal(err)
					}
				}
			}
			if late != nil {
				frames += uint64(len(tt.lateWants))
				if got := queuedSeqs(t, late); !slices.Equal(got, tt.lateWants) {
					t.Fatalf("the stream subscribed mid-run was queued %v, want %v", got, tt.lateWants)
				}
			}
			if w, want := g.writes(), slices.Sorted(slices.Values(tt.writes)); !slices.Equal(w, want) {
				t.Fatalf("writes of %v frames, want %v", w, want)
			}
			if st := ts.hub.Stats(); st.Delivered != frames || st.Dropped != 0 {
				t.Fatalf("stats %+v, want %d delivered", st, frames)
			}
		})
	}
}

func repeat(v, n int) []int { return slices.Repeat([]int{v}, n) }

// With enough streams for the pool writers to share a run, batches published
// while runs are being written (here from the writers' own writes) keep
// merging into runs several writers write at once: every stream still reads
// every frame once, in commit order, and a stream that took the topic
// midway is queued exactly what followed.
func TestMergingWithPoolWritersKeepsEveryStreamsOrder(t *testing.T) {
	const streams, batches = 2 * fanOutInline, 60
	if writerCount() < 2 {
		t.Skip("one P: the pool has a single writer") // CI has more
	}
	ctx := testCtx(t)
	var (
		ts         *testServer
		wrote, pub atomic.Int64
		late       atomic.Pointer[Subscription]
	)
	// publish runs in several goroutines at once (the writers' and the
	// streams' afterWrite hooks): the lock makes the order batches reach
	// the hub the order of their numbers, as the room's one writer
	// publishes in commit order. Without it a publisher could send k+1
	// before another sent k (most often at the mid-run Subscribe), and the
	// streams would rightly receive them in that order.
	var pubMu sync.Mutex
	publish := func() {
		pubMu.Lock()
		defer pubMu.Unlock()
		k := int(pub.Add(1))
		if k > batches {
			return
		}
		if k == batches/2+1 {
			s, err := ts.hub.Subscribe(SubscribeRequest{Topics: []string{"t"}})
			if err != nil {
				panic(err)
			}
			late.Store(s)
		}
		ts.hub.Publish(Batch{Messages: []Message{msg("t", k)}})
	}
	hk := hooks{afterWrite: func(*Subscription, int) {
		if wrote.Add(1)%(streams/8) == 0 {
			publish() // mid-run: eight batches per run at least
		}
	}}
	ts = newTestServerHooks(t, Config{MaxStreamsPerSession: -1, QueueLen: 4 * batches}, hk)
	cs := ts.openMany(ctx, streams, func(i int) (string, string, []string) {
		return fmt.Sprint("s", i), fmt.Sprint(i), []string{"t"}
	})
	for range streams {
		select {
		case <-ts.returned:
		case <-ctx.Done():
			t.Fatal("a handler never returned")
		}
	}
	publish()
	want := make([]int, batches)
	for i := range want {
		want[i] = i + 1
	}
	for _, c := range cs {
		if err := c.expectSeqs(want...); err != nil {
			t.Fatal(err)
		}
	}
	ts.hub.Close()
	for _, c := range cs {
		if err := c.expectFinal(); err != nil {
			t.Fatal(err)
		}
	}
	if got := queuedSeqs(t, late.Load()); !slices.Equal(got, want[batches/2:]) {
		t.Fatalf("the stream subscribed midway was queued %v, want %v", got, want[batches/2:])
	}
	if st := ts.hub.Stats(); st.Delivered != streams*batches+batches/2 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}
