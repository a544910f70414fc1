package exec_test

// The exec transport with real children: this test binary, symlinked as
// ce-transport-MODE on a temporary PATH, is the plugin (exectest).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
	cexec "github.com/commonroom/ce/transport/exec"
	"github.com/commonroom/ce/transport/exec/exectest"
)

func TestMain(m *testing.M) {
	exectest.RunIfPlugin()
	os.Exit(m.Run())
}

// waitBound is the generous upper bound for anything a child must do.
const waitBound = 20 * time.Second

// pluginEnv is a PATH holding ce-transport-MODE for each mode, a directory
// the children record their pids in, and a log the plugin writes to.
type pluginEnv struct {
	path, pids string
	logs       *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newPluginEnv(t *testing.T) *pluginEnv {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, pids := t.TempDir(), t.TempDir()
	for _, mode := range []string{"test", "garbage", "dies", "hangs", "wrongtype", "refuses"} {
		if err := os.Symlink(self, filepath.Join(bin, "ce-transport-"+mode)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(exectest.PidDirEnv, pids)
	return &pluginEnv{path: bin, pids: pids, logs: &syncBuffer{}}
}

func (e *pluginEnv) open(t *testing.T, name string) (transport.Plugin, error) {
	t.Helper()
	getenv := func(k string) string {
		if k == "PATH" {
			return e.path
		}
		return os.Getenv(k)
	}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return cexec.NewProvider(name).Open(context.Background(), transport.Options{Getenv: getenv, Logger: log, StateDir: t.TempDir()})
}

// childPids lists the pids the children of mode recorded for cmd.
func (e *pluginEnv) childPids(t *testing.T, mode, cmd string) []int {
	t.Helper()
	pids, err := exectest.Pids(e.pids, mode, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// wantReaped fails unless every pid names no process at all: not running,
// and not a zombie waiting to be reaped.
func wantReaped(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no child recorded its pid")
	}
	for _, pid := range pids {
		deadline := time.Now().Add(waitBound)
		for {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				t.Fatalf("child %d still exists (running or a zombie): %s", pid, stat)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// ingress is a loopback HTTP server standing in for the room's ingress.
func ingress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "room here; you asked for %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func TestExecExposeAndDial(t *testing.T) {
	e := newPluginEnv(t)
	p, err := e.open(t, "exec:test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	addr := ingress(t)
	h, err := p.Expose(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the hint is the child's line", func(t *testing.T) {
		if h.Type != "exec:test" || h.Address != exectest.Address || h.Port <= 0 || h.Mode != "private" || h.Params["forward"] == "" {
			t.Fatalf("hint %+v", h)
		}
	})
	t.Run("a second expose is refused", func(t *testing.T) {
		if _, err := p.Expose(ctx, addr); !errors.Is(err, transport.ErrUnavailable) {
			t.Fatalf("second expose: %v", err)
		}
	})
	t.Run("HTTP goes through a dial child to the ingress", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.Dial(ctx, h)
		}}}
		defer hc.CloseIdleConnections()
		for i := range 3 {
			resp, err := hc.Get("http://" + h.HostPort() + "/x")
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "room here; you asked for " + h.HostPort(); string(b) != want {
				t.Fatalf("got %q, want %q", b, want)
			}
		}
	})
	t.Run("a raw connection carries bytes both ways and ends", func(t *testing.T) {
		c, err := p.Dial(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.0 200") {
			t.Fatalf("%q %v", line, err)
		}
		c.Close()
	})
	t.Run("a hint of another type is not dialled", func(t *testing.T) {
		other := h
		other.Type = "exec:other"
		if _, err := p.Dial(ctx, other); !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "not for exec:test") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("close ends and reaps every child", func(t *testing.T) {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		wantReaped(t, e.childPids(t, "test", "expose"))
		wantReaped(t, e.childPids(t, "test", "dial"))
		if _, err := p.Dial(ctx, h); !errors.Is(err, transport.ErrUnavailable) {
			t.Fatalf("dial after close: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	})
}

func TestExecBadPlugins(t *testing.T) {
	e := newPluginEnv(t)
	addr := ingress(t)
	t.Run("a missing program is unavailable and named", func(t *testing.T) {
		_, err := e.open(t, "exec:nosuch")
		if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "ce-transport-nosuch is not on PATH") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a name that could leave PATH is refused", func(t *testing.T) {
		for _, name := range []string{"exec:", "exec:../test", "exec:a/b", "exec:-x", "exec: x", "exec:" + strings.Repeat("a", 65), "nope"} {
			if _, err := e.open(t, name); !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "not an exec transport") {
				t.Errorf("%q: %v", name, err)
			}
		}
	})
	for _, c := range []struct {
		mode, why string
		timeout   time.Duration
	}{
		{"garbage", `not a JSON hint`, waitBound},
		{"dies", "exit status 3", waitBound},
		{"hangs", "no hint within the time allowed", 300 * time.Millisecond},
		{"wrongtype", `of type "exec:other", not "exec:wrongtype"`, waitBound},
	} {
		t.Run("a child that "+c.mode+" is unavailable, named, ended and reaped", func(t *testing.T) {
			p, err := e.open(t, "exec:"+c.mode)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			_, err = p.Expose(ctx, addr)
			if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "ce-transport-"+c.mode) {
				t.Fatalf("expose: %v, want %q", err, c.why)
			}
			wantReaped(t, e.childPids(t, c.mode, "expose"))
		})
	}
	t.Run("what a dying child says is logged and quoted redacted", func(t *testing.T) {
		p, err := e.open(t, "exec:dies")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_, err = p.Expose(context.Background(), addr)
		if err == nil || !strings.Contains(err.Error(), "fatal: cannot start") || strings.Contains(err.Error(), exectest.Secret) {
			t.Fatalf("error %v", err)
		}
		if logs := e.logs.String(); !strings.Contains(logs, "fatal: cannot start") || strings.Contains(logs, "kTESTSECRET") {
			t.Fatalf("log:\n%s", logs)
		}
	})
	t.Run("a dial the child refuses is unavailable with its reason", func(t *testing.T) {
		p, err := e.open(t, "exec:refuses")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		h, err := p.Expose(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Dial(ctx, h)
		if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "no route to the room today") {
			t.Fatalf("dial: %v", err)
		}
		wantReaped(t, e.childPids(t, "refuses", "dial"))
	})
	t.Run("a dial whose child prints garbage or dies is unavailable and reaped", func(t *testing.T) {
		for _, mode := range []string{"garbage", "dies"} {
			p, err := e.open(t, "exec:"+mode)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitBound)
			_, err = p.Dial(ctx, transport.Hint{Type: "exec:" + mode, Address: "x.invalid", Port: 1, Mode: "private"})
			cancel()
			if !errors.Is(err, transport.ErrUnavailable) {
				t.Errorf("%s: %v", mode, err)
			}
			wantReaped(t, e.childPids(t, mode, "dial"))
			p.Close()
		}
	})
	t.Run("a child that outlives its hint is ended by close", func(t *testing.T) {
		p, err := e.open(t, "exec:test")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if _, err := p.Expose(ctx, addr); err != nil {
			t.Fatal(err)
		}
		pids := e.childPids(t, "test", "expose")
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("the exposing child %d is not running: %v", pid, err)
			}
		}
		p.Close()
		wantReaped(t, pids)
	})
}

func TestExecHintLine(t *testing.T) {
	// The expose line's rules, one by one (the real children above cover
	// the way a line reaches them).
	for _, c := range []struct {
		line, why string
	}{
		{`{"type":"exec:t","address":"a.example","port":80,"mode":"private","encrypted":true}`, ""},
		{`{"address":"a.example","port":80,"mode":"local","encrypted":false}`, ""},
		{`{"address":"2001:db8::7","ips":["192.0.2.7"],"port":80,"mode":"public","encrypted":false}`, ""},
		{`{"address":"[2001:db8::7]","port":80,"mode":"public","encrypted":false}`, "not a host name"},
		{`{"type":"exec:t","address":"a.example","port":80,"mode":"private","encrypted":true,"secret":"x"}`, "not a JSON hint"},
		{`{"type":"exec:t","address":"a.example","port":80,"mode":"private"} {}`, "not a JSON hint"},
		{`{"type":"exec:t","address":"a b","port":80,"mode":"private"}`, "not a host name"},
		{`{"type":"exec:t","address":"u@a.example","port":80,"mode":"private"}`, "not a host name"},
		{`{"type":"exec:t","address":"a.example","port":0,"mode":"private"}`, "no port"},
		{`{"type":"exec:t","address":"a.example","port":80,"mode":"everyone"}`, "mode"},
		{`{"type":"exec:t","address":"a.example","ips":["not-an-ip"],"port":80,"mode":"private"}`, "not an IP"},
		{`[1,2]`, "not a JSON hint"},
	} {
		_, err := cexec.ParseHint(c.line, "exec:t")
		if c.why == "" && err != nil || c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%s: %v, want %q", c.line, err, c.why)
		}
	}
}
