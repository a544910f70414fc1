package tailscale

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
)

// lockedBuffer is a log sink several goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// debugLogger records everything a plugin logs, debug included.
func debugLogger() (*slog.Logger, *lockedBuffer) {
	buf := &lockedBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// noEnv is a Getenv that sees nothing, so a developer's TS_AUTHKEY never
// leaks into a test.
func noEnv(string) string { return "" }

// openPlugin parses args as `ce serve`/`ce join` would and opens a plugin,
// closed when the test ends.
func openPlugin(t testing.TB, args []string, opts transport.Options) *Plugin {
	t.Helper()
	pl, err := tryOpen(args, opts)
	if err != nil {
		t.Fatalf("open %v: %v", args, err)
	}
	t.Cleanup(func() { pl.Close() })
	return pl
}

func tryOpen(args []string, opts transport.Options) (*Plugin, error) {
	prov := NewProvider()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	prov.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if opts.Getenv == nil {
		opts.Getenv = noEnv
	}
	p, err := prov.Open(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	return p.(*Plugin), nil
}

// notOnTailnet makes the plugin see no tailnet address on this machine, so
// it never tries the direct path (which would leave 127.0.0.1).
func notOnTailnet(p *Plugin) *Plugin {
	p.localTailnetAddrs = func() []netip.Addr { return nil }
	return p
}

// ingress stands in for the room's session-only ingress: a real HTTP
// server on 127.0.0.1 with a plain answer and an SSE stream the test paces.
type ingress struct {
	srv     *httptest.Server
	release chan struct{} // lets /events send its second event
}

func newIngress(t testing.TB) *ingress {
	in := &ingress{release: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the room; host=%s", r.Host)
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-in.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream stays open until the client leaves
	})
	in.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		in.srv.CloseClientConnections() // streams included, so Close does not wait for them
		in.srv.Close()
	})
	return in
}

func (in *ingress) addr() string { return in.srv.Listener.Addr().String() }

// get sends one GET over conn and returns the status and body.
func get(t testing.TB, conn net.Conn, host, path string) (int, string) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	defer conn.SetDeadline(time.Time{})
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", path, err)
	}
	return res.StatusCode, string(b)
}

// httpClientVia is an HTTP client whose every connection is dial().
func httpClientVia(dial func(ctx context.Context) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}
}

// goroutines lists the running goroutines by id, with their stacks.
func goroutines() map[int]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		rest, ok := strings.CutPrefix(g, "goroutine ")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(rest[:strings.IndexByte(rest, ' ')])
		if err == nil {
			out[id] = g
		}
	}
	return out
}

// expectNoNewGoroutines fails unless, within a generous bound, every
// goroutine that was not in before has ended.
func expectNoNewGoroutines(t testing.TB, before map[int]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var leaked []string
		for id, g := range goroutines() {
			if _, ok := before[id]; !ok {
				leaked = append(leaked, g)
			}
		}
		// the goroutine running this check was counted in before or is us
		leaked = dropSelf(leaked)
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(leaked)
			t.Fatalf("%d goroutines left behind:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dropSelf(gs []string) []string {
	out := gs[:0]
	for _, g := range gs {
		if strings.Contains(g, "expectNoNewGoroutines") {
			continue
		}
		out = append(out, g)
	}
	return out
}

func stateDir(t testing.TB, doc string) string {
	return filepath.Join(t.TempDir(), doc+".commonroom.tailscale")
}
