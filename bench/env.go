package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// env is what every scenario shares: the configuration, where rooms live,
// the fault log, the report being built and the progress writer.
type env struct {
	cfg      config
	bin      string // the ce binary built for this run ("" with --target-file)
	workDir  string // temp dir for rooms and the SQLite baseline
	target   *ceServer
	faults   *faults
	rep      *report
	progress io.Writer

	mu      sync.Mutex
	started []*ceServer // children to stop on exit
	seq     int
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.progress, "bench: "+format+"\n", args...)
}

// room returns a room to run one scenario against: a fresh `ce serve` with
// these flags (each scenario starts from an empty sidecar so earlier ones
// cannot skew it), or the --target-file room when forceOwn is false.
func (e *env) room(ctx context.Context, name string, forceOwn bool, flags ...string) (*ceServer, error) {
	if e.target != nil && !forceOwn {
		return e.target, nil
	}
	if e.bin == "" {
		return nil, fmt.Errorf("%s needs a room of its own, but no ce binary was built", name)
	}
	e.mu.Lock()
	e.seq++
	dir := filepath.Join(e.workDir, fmt.Sprintf("%02d-%s", e.seq, name))
	e.mu.Unlock()
	// The fan-out's streams are each a connection to the ingress: lift its
	// connection cap above the largest fan-out.
	base := []string{"--max-sessions", "512", "--max-sessions-per-invite", "512", "--rate-limit", "0",
		"--max-conns", strconv.Itoa(slices.Max(e.cfg.fanoutSizes) + 2048)}
	c, err := startCE(ctx, e.bin, dir, "room", append(base, flags...)...)
	return e.track(c, err)
}

// track registers a room the bench started, so it is stopped on exit.
func (e *env) track(c *ceServer, err error) (*ceServer, error) {
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.started = append(e.started, c)
	e.mu.Unlock()
	return c, nil
}

// serveAgain serves the document of a room the bench stopped, with the same
// binary and flags, on the sidecar as it now is. The new process is stopped
// on exit like any other; the old *ceServer stays stopped.
func (e *env) serveAgain(ctx context.Context, old *ceServer) (*ceServer, error) {
	if old.bin == "" {
		return nil, fmt.Errorf("%s was not started by the bench; it cannot be served again", old.file)
	}
	return e.track(serveCE(ctx, old.bin, old.file, old.logPath, old.flags...))
}

// release stops a room the bench started; a target room is left alone.
func (e *env) release(c *ceServer) {
	if c == nil || !c.owned() {
		return
	}
	if err := c.stop(); err != nil {
		e.faults.add("ce exit", fmt.Sprintf("%v (log: %s)", err, tail(c.logPath)))
	}
}

// stopAll is the last line of defence: every child still running is stopped.
func (e *env) stopAll() {
	e.mu.Lock()
	list := e.started
	e.started = nil
	e.mu.Unlock()
	for _, c := range list {
		c.stop()
	}
}

// fault records an unexpected error unless the run is being cancelled, in
// which case errors are the expected consequence.
func (e *env) fault(ctx context.Context, where string, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	e.faults.add(where+": "+errKind(err), err.Error())
}

// roomClient bundles a room with the load client used against it.
type roomClient struct {
	c  *ceServer
	hc *http.Client
}

func newRoomClient(c *ceServer, conns int) *roomClient {
	return &roomClient{c: c, hc: newLoadClient(conns)}
}

func (rc *roomClient) mcp(s session) *mcpClient {
	return newMCP(rc.hc, rc.c.ingressURL+"/mcp", s.Token)
}

// sessions joins n participants with exactly these capabilities.
func (rc *roomClient) sessions(ctx context.Context, prefix string, n int, caps ...string) ([]session, error) {
	inv, err := rc.c.invite(ctx, caps...)
	if err != nil {
		return nil, fmt.Errorf("invite %v: %w", caps, err)
	}
	return joinMany(ctx, rc.hc, rc.c.ingressURL, inv, prefix, n)
}

func (rc *roomClient) close() { rc.hc.CloseIdleConnections() }

// sampler polls /debug/metrics every interval until stopped, so the bench
// sees the room's own state (active tasks, drops) rather than inferring it.
type sampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	maxAct  int
	samples int
	last    roomMetrics
	errs    int
	lastErr error
}

func startSampler(ctx context.Context, c *ceServer, every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m, err := c.metrics(ctx)
			s.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					s.errs++
					s.lastErr = err
				}
			} else {
				s.samples++
				s.maxAct = max(s.maxAct, m.Room.ActiveTasks)
				s.last = m
			}
			s.mu.Unlock()
			select {
			case <-t.C:
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// finish stops the sampler and waits for its goroutine.
func (s *sampler) finish() (maxActive, samples int, last roomMetrics, errs int, lastErr error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxAct, s.samples, s.last, s.errs, s.lastErr
}

// progressTicker prints a progress line every 10 s until the returned func
// is called (which also waits for the goroutine).
func (e *env) progressTicker(ctx context.Context, what string, line func() string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-t.C:
				e.logf("%s: %s after %s", what, line(), time.Since(start).Round(time.Second))
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

// waitQuiet waits, up to --wait-quiet, for a 2-second window in which the
// rest of the machine uses less than 30% of one core. The machine may be
// shared (other people's test runs); a figure taken while they run measures
// them too. It never changes what is measured, only when.
func (e *env) waitQuiet(ctx context.Context, what string) {
	if e.cfg.waitQuiet <= 0 {
		return
	}
	deadline := time.Now().Add(e.cfg.waitQuiet)
	self0 := selfCPU()
	b0, t0 := machineJiffies()
	logged := false
	for ctx.Err() == nil {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return
		}
		b1, t1 := machineJiffies()
		self1 := selfCPU()
		if t1 > t0 {
			busy := 100 * float64(runtime.NumCPU()) * float64(b1-b0) / float64(t1-t0)
			// Only rooms started by this bench run, and the bench itself, are ours;
			// between scenarios our rooms are idle, so what is left is the others.
			others := busy - 100*(self1-self0).Seconds()/2
			if others < 30 {
				return
			}
			if time.Now().After(deadline) {
				e.logf("%s: the machine is still busy (others %.0f%% of a core); going ahead", what, others)
				return
			}
			if !logged {
				e.logf("%s: waiting for the machine to quieten (others %.0f%% of a core)", what, others)
				logged = true
			}
		}
		b0, t0, self0 = b1, t1, self1
	}
}
