package tailscale

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
	"github.com/commonroom/ce/transport/tailscale/tailnettest"
)

// The figures of the closing note, measured on the in-process test
// tailnet (never asserted):
//
//	go test -run '^$' -bench . -benchtime 3x ./transport/tailscale

// BenchmarkExpose: from Open to Expose returning with the node up, and the
// memory one embedded node adds to the process. This process already runs
// the test tailnet (control server, relay), which has paged in most of the
// code and tables a node shares, so its RSS figure understates what a node
// adds to a fresh `ce serve` (about 10 MB there, measured separately); the
// Go heap figure counts buffers a node reserves, most never touched.
func BenchmarkExpose(b *testing.B) {
	tn := tailnettest.Start(b, tailnettest.Options{})
	in := newIngress(b)
	ctx := context.Background()
	var total time.Duration
	var rssFirst, heapFirst, rssAdded, heapAdded float64
	for i := 0; i < b.N; i++ {
		rss0, heap0 := memNow()
		start := time.Now()
		p, err := tryOpen([]string{"--ts-control-url", tn.ControlURL, "--ts-hostname", "bench-" + strconv.Itoa(i)},
			transport.Options{StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Expose(ctx, in.addr()); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		rss1, heap1 := memNow()
		rssAdded += float64(rss1 - rss0)
		heapAdded += float64(heap1 - heap0)
		if i == 0 { // the process's first node: tailscale's one-time set-up included
			rssFirst, heapFirst = float64(rss1-rss0), float64(heap1-heap0)
		}
		p.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-up/op")
	b.ReportMetric(rssAdded/float64(b.N)/(1<<20), "MiB-rss-added/op")
	b.ReportMetric(heapAdded/float64(b.N)/(1<<20), "MiB-heap-added/op")
	b.ReportMetric(rssFirst/(1<<20), "MiB-rss-first-node")
	b.ReportMetric(heapFirst/(1<<20), "MiB-heap-first-node")
}

// BenchmarkDialRoundTrip: a joiner's Dial and one HTTP round trip over the
// tailnet, with the joiner's own node starting (cold) and already up (warm).
func BenchmarkDialRoundTrip(b *testing.B) {
	tn := tailnettest.Start(b, tailnettest.Options{})
	in := newIngress(b)
	ctx := context.Background()
	room := openPlugin(b, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral"}, transport.Options{StateDir: stateDir(b, "bench.md")})
	hint, err := room.Expose(ctx, in.addr())
	if err != nil {
		b.Fatal(err)
	}
	warm := notOnTailnet(openPlugin(b, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true}))
	roundTrip := func(p *Plugin) {
		c, err := p.Dial(ctx, hint)
		if err != nil {
			b.Fatal(err)
		}
		if code, _ := get(b, c, hint.HostPort(), "/hello"); code != 200 {
			b.Fatalf("GET: %d", code)
		}
		c.Close()
	}
	roundTrip(warm)
	var cold, hot time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		p, err := tryOpen([]string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true})
		if err != nil {
			b.Fatal(err)
		}
		notOnTailnet(p)
		roundTrip(p)
		cold += time.Since(start)
		p.Close()

		start = time.Now()
		roundTrip(warm)
		hot += time.Since(start)
	}
	b.ReportMetric(float64(cold.Microseconds())/float64(b.N)/1000, "ms-cold-node/op")
	b.ReportMetric(float64(hot.Microseconds())/float64(b.N)/1000, "ms-warm-node/op")
}

// BenchmarkRequests: 1,000 small HTTP requests on one keep-alive connection
// over the tailnet, beside the same straight to the ingress on loopback.
func BenchmarkRequests(b *testing.B) {
	tn := tailnettest.Start(b, tailnettest.Options{})
	in := newIngress(b)
	ctx := context.Background()
	room := openPlugin(b, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral"}, transport.Options{StateDir: stateDir(b, "bench.md")})
	hint, err := room.Expose(ctx, in.addr())
	if err != nil {
		b.Fatal(err)
	}
	joiner := notOnTailnet(openPlugin(b, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true}))
	overTailnet := httpClientVia(func(ctx context.Context) (net.Conn, error) { return joiner.Dial(ctx, hint) })
	var d net.Dialer
	overLoopback := httpClientVia(func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", in.addr()) })
	run := func(c *http.Client, url string) (p50, p99 time.Duration) {
		lat := make([]time.Duration, 0, 1000)
		for range 1000 {
			start := time.Now()
			res, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	run(overTailnet, "http://"+hint.HostPort()+"/hello") // connect once
	var tp50, tp99, lp50, lp99 time.Duration
	for i := 0; i < b.N; i++ {
		a, z := run(overTailnet, "http://"+hint.HostPort()+"/hello")
		tp50, tp99 = tp50+a, tp99+z
		a, z = run(overLoopback, "http://"+in.addr()+"/hello")
		lp50, lp99 = lp50+a, lp99+z
	}
	n := float64(b.N)
	b.ReportMetric(float64(tp50.Microseconds())/n, "µs-p50-tailnet")
	b.ReportMetric(float64(tp99.Microseconds())/n, "µs-p99-tailnet")
	b.ReportMetric(float64(lp50.Microseconds())/n, "µs-p50-loopback")
	b.ReportMetric(float64(lp99.Microseconds())/n, "µs-p99-loopback")
	overTailnet.CloseIdleConnections()
	overLoopback.CloseIdleConnections()
}

// memNow is the process's resident memory (Linux) and Go heap in use, after
// a collection that returns what it can to the system.
func memNow() (rss, heap int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, int64(ms.HeapInuse)
}
