package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bare SSE server too: the
// baseline re-executes os.Executable(), which under `go test` is this
// binary, not the bench's.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == bareSSEFlag {
		os.Exit(bareSSEMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == trivialHTTPFlag {
		os.Exit(trivialHTTPMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSmoke runs `go run ./bench --smoke` end to end: it builds ce, starts
// real rooms on loopback and runs every scenario briefly. It fails when an
// invariant breaks (active tasks above the cap, a frame lost on a stream
// that was not dropped, an unexpected error), never on a speed figure.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real rooms for about 40 s; skipped with -short (CI runs `go run ./bench --smoke` as a step of its own too)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--smoke", "--json", "--preload", "1500"}, &stdout, &stderr)
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not one JSON document: %v\nstderr:\n%s", code, err, stderr.String())
	}
	if code != exitOK || !rep.OK {
		t.Fatalf("smoke run failed (exit %d): violations %v, faults %v %v, errors %v\nstderr:\n%s",
			code, rep.Violations, rep.Faults, rep.FaultSamples, rep.Errors, stderr.String())
	}
	// The run must have measured what it claims, not passed by skipping.
	switch {
	case rep.Lifecycle == nil || rep.Lifecycle.Lifecycles == 0 || rep.Lifecycle.MetricsSamples == 0:
		t.Errorf("lifecycle measured nothing: %+v", rep.Lifecycle)
	case rep.LifecycleNoGC == nil || rep.LifecycleNoGC.Lifecycles == 0:
		t.Errorf("group-commit-off lifecycle measured nothing")
	case rep.Poll == nil || rep.Poll.Tight.Requests == 0 || rep.Poll.HandoffGet.Requests == 0:
		t.Errorf("poll measured nothing: %+v", rep.Poll)
	case rep.Fanout == nil || len(rep.Fanout.Sizes) == 0 || rep.Fanout.Sizes[0].Steady.Frames == 0:
		t.Errorf("fan-out measured nothing: %+v", rep.Fanout)
	case rep.Baselines == nil || rep.Baselines.HTTP == nil || rep.Baselines.SQLiteGroup == nil || len(rep.Baselines.FanLoop) == 0:
		t.Errorf("baselines missing: %+v", rep.Baselines)
	case len(rep.Baselines.BareSSE) == 0 || rep.Baselines.BareSSE[0].Max.Frames == 0 || rep.Baselines.BareSSE[0].Steady.Frames == 0:
		t.Errorf("bare SSE fan-out measured nothing: %+v", rep.Baselines.BareSSE)
	case rep.Fanout.Sizes[0].Max.VsBareSSE == 0:
		t.Errorf("fan-out not compared with the bare SSE baseline")
	case rep.Preload == nil || rep.Preload.Large == nil || rep.Preload.Large.Handoffs < 1500:
		t.Errorf("preload measured nothing: %+v", rep.Preload)
	case rep.Watch == nil || rep.Watch.Latency.Count != int64(rep.Watch.Saves) || rep.Watch.Frames == 0:
		t.Errorf("watch measured nothing: %+v", rep.Watch)
	case rep.Hostile == nil || len(rep.Hostile.Phases) < 3 || rep.Hostile.Phases[0].SockDuring <= rep.Hostile.Phases[0].SockBefore:
		t.Errorf("hostile_conns measured nothing: %+v", rep.Hostile)
	case rep.Hostile.SecondPeer == nil || rep.Hostile.SecondPeer.Fresh.Requests == 0 || rep.Hostile.SecondPeer.Kept.Requests == 0 ||
		rep.Hostile.SecondPeer.FloodOpened <= int64(rep.Hostile.SecondPeer.MaxConns):
		t.Errorf("hostile_conns: the flood did not pass the cap or the second peer measured nothing: %+v", rep.Hostile.SecondPeer)
	case rep.Versions == nil || rep.Versions.Commits == 0 || rep.Versions.SidecarAfterBytes <= rep.Versions.SidecarBeforeBytes ||
		rep.Versions.RSSAfterOpenKB == 0 || rep.Versions.PeakAfterEditKB == 0:
		t.Errorf("versions measured nothing: %+v", rep.Versions)
	case rep.Poll.Tight.CPUPerRequestUs <= 0 || rep.Poll.HandoffGet.CPUPerRequestUs <= 0 || rep.Baselines.HTTP.CPUPerRequestUs <= 0 ||
		rep.Lifecycle.CPUPerRequestUs <= 0 || rep.Lifecycle.WriterCPUPerCommandUs <= 0 || rep.Lifecycle.WriterCPUSource == "":
		t.Errorf("a request-rate phase has no server CPU per request: poll %+v / %+v, baseline %+v, lifecycle %+v",
			rep.Poll.Tight, rep.Poll.HandoffGet, rep.Baselines.HTTP, rep.Lifecycle)
	case rep.Fanout.Sizes[0].Receiver != defaultReceiver || rep.Baselines.BareSSE[0].Receiver != defaultReceiver:
		t.Errorf("the fan-out was not read by the default receiver %q", defaultReceiver)
	case rep.Soak == nil || len(rep.Soak.Samples) < 10 || len(rep.Soak.Trends) != len(soakQuantities) || rep.Soak.Ops["handoff created"] == 0:
		t.Errorf("the soak measured nothing: %+v", rep.Soak)
	case rep.Soak.Trends[0].Samples == 0 || rep.Soak.IdleBefore.Goroutines == 0 || rep.Soak.IdleAfter.FDs == 0:
		t.Errorf("the soak has no samples after its warm-up or no idle figures: %+v", rep.Soak.Trends[0])
	}
	if rep.Lifecycle != nil && rep.Lifecycle.MaxActiveTasks > maxActiveTasks {
		t.Errorf("max active tasks %d above the cap", rep.Lifecycle.MaxActiveTasks)
	}
	for _, s := range rep.Fanout.Sizes {
		if s.Streams > 100 {
			t.Errorf("smoke ran %d streams; it must stay at 100 or fewer", s.Streams)
		}
	}
}

// TestAccountingCatchesLostFrames checks the fan-out invariant itself: a
// stream still open that received fewer frames than were committed is a
// violation, a dropped one is not.
func TestAccountingCatchesLostFrames(t *testing.T) {
	var out bytes.Buffer
	e := &env{faults: newFaults(), rep: &report{out: &out}}
	f := &fanRoom{e: e}
	f.committed.Store(10)
	for _, st := range []struct {
		frames int64
		state  int32
	}{{10, streamOpen}, {7, streamOpen}, {3, streamDropped}} {
		s := &listenStream{done: make(chan struct{})}
		s.frames.Store(st.frames)
		s.state.Store(st.state)
		f.streams = append(f.streams, s)
	}
	var r fanoutSizeResult
	f.account(context.Background(), "test", &r)
	if r.StreamsLost != 1 || r.FramesLost != 3 || r.StreamsDropped != 1 {
		t.Fatalf("got lost streams %d, lost frames %d, dropped %d; want 1, 3, 1", r.StreamsLost, r.FramesLost, r.StreamsDropped)
	}
	if len(e.rep.Violations) != 1 || !strings.Contains(e.rep.Violations[0], "lost 3 frames") {
		t.Fatalf("violations %v", e.rep.Violations)
	}
}

// TestHistogramQuantiles keeps the latency buckets honest to within their
// ~3% resolution.
func TestHistogramQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, 1000 * time.Millisecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.04 || d > 0.04 {
			t.Errorf("q%.2f = %v, want %v ±4%%", c.q, got, c.want)
		}
	}
	var a atomicHist
	a.add(3 * time.Millisecond)
	if s := a.snapshot(); s.n != 1 || s.quantile(0.5) < 2900*time.Microsecond || s.quantile(0.5) > 3100*time.Microsecond {
		t.Errorf("atomic histogram: n %d, p50 %v", s.n, s.quantile(0.5))
	}
}

// TestPreloadBulk runs the preload's bulk mode end to end on a small sidecar:
// ce writes the first 1,000 handoffs, the bench stops it, checks that its
// own rows would be identical to one ce wrote, inserts the rest, runs
// foreign_key_check and integrity_check, and ce must serve the file again
// and answer tasks/get on bulk rows as on its own. It is what breaks first
// when a migration or CreateHandoff changes the rows' shape.
func TestPreloadBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real room twice; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--smoke", "--json", "--scenarios", "preload", "--preload", "3000", "--preload-mode", "bulk"}, &stdout, &stderr)
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not one JSON document: %v\nstderr:\n%s", code, err, stderr.String())
	}
	if code != exitOK || !rep.OK {
		t.Fatalf("bulk preload failed (exit %d): faults %v %v, errors %v\nstderr:\n%s",
			code, rep.Faults, rep.FaultSamples, rep.Errors, stderr.String())
	}
	p := rep.Preload
	switch {
	case p == nil || p.Large == nil:
		t.Fatalf("bulk preload measured nothing: %+v", p)
	case p.Mode != "bulk":
		t.Errorf("preload_mode %q, want bulk", p.Mode)
	case p.Large.Handoffs < 3000 || p.Large.TasksGet.Count == 0 || p.Large.Create.Count == 0:
		t.Errorf("the probe after the bulk load measured too little: %+v", p.Large)
	case p.HandoffsPerSec <= 0:
		t.Errorf("no load rate: %+v", p)
	}
}

// TestSameRowCatchesShapeChanges: the bulk rows are checked against a row ce
// wrote, NULLs and unknown columns included.
func TestSameRowCatchesShapeChanges(t *testing.T) {
	cols := []string{"a", "b", "c"}
	want := []column{{"a", "x"}, {"b", []byte{1, 2}}}
	for _, c := range []struct {
		got  []any
		want []column
		ok   bool
	}{
		{[]any{"x", []byte{1, 2}, nil}, want, true},
		{[]any{"x", []byte{1, 3}, nil}, want, false},                                      // a different value
		{[]any{"x", []byte{1, 2}, int64(7)}, want, false},                                 // ce set a column the bulk rows leave NULL
		{[]any{"x", []byte{1, 2}, nil}, append(want[:2:2], column{"d", int64(1)}), false}, // a column ce's table lacks
	} {
		if err := sameRow("t", cols, c.got, c.want); (err == nil) != c.ok {
			t.Errorf("sameRow(%v, %v) = %v, want ok=%v", c.got, c.want, err, c.ok)
		}
	}
	if h := requestHash("s"); len(h) != 32 {
		t.Errorf("requestHash is %d bytes", len(h))
	}
}
