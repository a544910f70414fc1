package listen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStreamFanout is publish → every socket written: N real SSE streams
// over loopback TCP on one topic, one message per iteration, timed until every
// stream has written and flushed it (the afterWrite hook), the way a steady
// room at a few changes per second sees it (one frame per write). Nobody
// reads during the timed part, so the figures are the server side's own:
// cpu-ns/frame is process CPU (getrusage) per delivered frame, wakes/frame
// the goroutine wake-ups per delivered frame (runtime/metrics
// /sched/latencies, which samples one in eight: multiplied back), and
// allocs/op the allocations per change. The sockets are drained with the
// timer stopped.
func BenchmarkStreamFanout(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchStreams(b, n) })
	}
}

func benchStreams(b *testing.B, n int) {
	var written atomic.Int64
	wrote := make(chan struct{}, 1)
	var want atomic.Int64
	hk := hooks{afterWrite: func(_ *Subscription, frames int) {
		if written.Add(int64(frames)) == want.Load() {
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	}}
	// Lag rules far away: draining happens with the timer stopped and must
	// not look like a stall.
	ts := newTestServerHooks(b, Config{MaxLag: time.Hour, MaxStreamsPerSession: -1}, hk)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "", fmt.Sprintf("%d", i), []string{"events"}
	})
	batch := Batch{Messages: []Message{{Topic: "events", Change: testChange{testMethod, benchParams}}}}
	const drainEvery = 64 // frames a loopback receive buffer holds comfortably
	var cpu, wakes int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c0, w0 := cpuNanos(), schedWakes()
		want.Store(int64(n) * int64(i+1))
		h := ts.hub
		h.Publish(batch)
		select {
		case <-wrote:
		case <-ctx.Done():
			b.Fatalf("frames written %d of %d", written.Load(), want.Load())
		}
		for written.Load() < want.Load() {
			<-wrote
		}
		cpu += cpuNanos() - c0
		wakes += schedWakes() - w0
		if (i+1)%drainEvery == 0 {
			b.StopTimer()
			drainAll(b, streams)
			b.StartTimer()
		}
	}
	b.StopTimer()
	frames := float64(b.N) * float64(n)
	b.ReportMetric(float64(cpu)/frames, "cpu-ns/frame")
	b.ReportMetric(float64(wakes)/frames, "wakes/frame")
	if st := ts.hub.Stats(); st.Dropped != 0 {
		b.Fatalf("streams dropped during the benchmark: %+v", st)
	}
}

// drainAll reads whatever waits on every client socket, so the next frames
// find room in the kernel buffers.
func drainAll(b *testing.B, streams []*clientStream) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, c := range streams {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			buf := make([]byte, 64<<10)
			for {
				_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				if _, err := c.conn.Read(buf); err != nil {
					var ne net.Error
					if !errors.As(err, &ne) || !ne.Timeout() {
						b.Errorf("draining: %v", err)
					}
					break
				}
			}
			_ = c.conn.SetReadDeadline(time.Time{})
		})
	}
	wg.Wait()
}

// cpuNanos is the process's user+system CPU so far.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// schedWakes estimates goroutine wake-ups so far: the runtime records the
// runnable→running latency of one scheduling in eight.
func schedWakes() int64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return int64(n) * 8
}

// BenchmarkIdleStreamMemory opens N idle SSE streams over loopback and
// reports what the server side holds per stream: heap in use, goroutine
// stacks, and goroutines. The client ends live in the same process, so each
// figure subtracts what the same N client connections cost alone
// (clientMemory). One iteration is one measurement.
func BenchmarkIdleStreamMemory(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			for range b.N {
				benchIdleMemory(b, n)
			}
		})
	}
}

type memFig struct{ heap, stacks, goroutines float64 }

func memNow() memFig {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	return memFig{float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64()), float64(s[2].Value.Uint64())}
}

func benchIdleMemory(b *testing.B, n int) {
	b.StopTimer()
	ts := newTestServer(b, Config{MaxStreamsPerSession: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := memNow()
	streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "", fmt.Sprintf("%d", i), []string{"events"}
	})
	time.Sleep(100 * time.Millisecond) // let the handlers park
	after := memNow()
	// LISTEN_HEAP_PROFILE=FILE (with -memprofilerate 1) writes the heap
	// as it stands with the streams open: what each stream holds, by site.
	if path := os.Getenv("LISTEN_HEAP_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	for _, c := range streams {
		c.close()
	}
	client := clientMemory(b, n)
	per := func(a, bf, c float64) float64 { return (a - bf - c) / float64(n) }
	b.ReportMetric(per(after.heap, before.heap, client.heap), "heap-B/stream")
	b.ReportMetric(per(after.stacks, before.stacks, client.stacks), "stack-B/stream")
	b.ReportMetric(per(after.goroutines, before.goroutines, client.goroutines), "goroutines/stream")
}

// clientMemory is what n client ends cost alone, opened the way openMany
// opens them, against a stand-in server that answers the headers and the
// acknowledgement, then hijacks the connection and lets its handler return,
// so it holds one net.Conn per stream and no goroutine. That net.Conn (a few
// hundred bytes) is counted as client cost, which flatters the server's
// figure by as much.
func clientMemory(b *testing.B, n int) memFig {
	var mu sync.Mutex
	var held []net.Conn
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		hdr := w.Header()
		hdr.Set("Content-Type", "text/event-stream")
		hdr.Set("Cache-Control", "no-cache")
		hdr.Set("X-Accel-Buffering", "no")
		hdr.Set("Connection", "close") // as a detached stream's answer says
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(testFrameBytes(ackMethod, `{"notifications":{}}`, id))
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		c, _, err := rc.Hijack()
		if err != nil {
			return
		}
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
	}))
	defer srv.Close()
	ts := &testServer{t: b, srv: srv}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := memNow()
	conns := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "", fmt.Sprintf("%d", i), []string{"events"}
	})
	time.Sleep(100 * time.Millisecond)
	after := memNow()
	for _, c := range conns {
		c.close()
	}
	mu.Lock()
	for _, c := range held {
		c.Close()
	}
	mu.Unlock()
	return memFig{after.heap - before.heap, after.stacks - before.stacks, after.goroutines - before.goroutines}
}
