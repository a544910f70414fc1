package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fanoutTasks is how many tasks every stream follows. Each change to any of
// them is one frame on every stream, and four drivers (one per task) give
// the writer concurrent commands to batch.
const fanoutTasks = 4

// fanoutWindow bounds the changes committed but not yet received by every
// stream in the max-rate phase: far below the room's 256-frame queue, so
// the phase measures throughput without provoking queue-full drops.
const fanoutWindow = 32

type fanPhaseResult struct {
	Mode             string  `json:"mode"`
	Seconds          float64 `json:"seconds"`
	Changes          int64   `json:"changes"`
	ChangesPerSec    float64 `json:"changes_per_sec"`
	Frames           int64   `json:"frames_received"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	Latency          latency `json:"commit_to_receipt"`
	CPU              cpuUse  `json:"cpu"`
	// CPU per frame delivered (µs): the server's, and the bench's (the
	// receiver with the drivers), so a receiver that costs as much as the
	// server shows.
	ServerCPUPerDeliveryUs float64 `json:"server_cpu_per_delivery_us"`
	BenchCPUPerDeliveryUs  float64 `json:"bench_cpu_per_delivery_us"`
	// Where the backlog was when the drivers stopped: batches the hub had
	// not fanned out yet, and bytes in the kernel between the two processes.
	HubPending      int     `json:"hub_pending_batches_at_end"`
	ServerSendQKB   float64 `json:"server_send_queue_kb_at_end"`
	ClientRecvQKB   float64 `json:"client_recv_queue_kb_at_end"`
	FramesBehindEnd int64   `json:"frames_not_yet_received_at_end"`
	// MeanFrameBytes is the average SSE line received (with its blank
	// line), so the bare SSE baseline can be seen to send frames of the
	// same size as the room's.
	MeanFrameBytes float64 `json:"mean_frame_bytes"`
	// FramesDropped is what the server discarded without ending a stream:
	// only the bare SSE baseline does that (the room drops whole streams).
	FramesDropped int64 `json:"frames_dropped,omitempty"`
	// The headline ratio is against the bare SSE fan-out over loopback,
	// the same socket-per-stream design with nothing of the room in it;
	// the in-memory channel loop is kept for reference (see baselines.go).
	VsBareSSE     float64 `json:"deliveries_vs_bare_sse,omitempty"`
	VsChannelLoop float64 `json:"deliveries_vs_channel_loop,omitempty"`
}

type fanoutSizeResult struct {
	Streams     int     `json:"streams"`
	Receiver    string  `json:"receiver"` // how the bench read the streams (--receiver)
	OpenSeconds float64 `json:"open_seconds"`
	RSSBeforeKB int64   `json:"rss_before_kb"`
	RSSAfterKB  int64   `json:"rss_after_kb"`
	// RSSPerStreamKB is the room process's resident memory per idle
	// listen stream: (RSS with every stream open and acknowledged, before
	// any change is driven) − (RSS before the first opened) ÷ streams.
	RSSPerStreamKB  float64        `json:"rss_per_stream_kb"`
	Steady          fanPhaseResult `json:"steady"`
	Max             fanPhaseResult `json:"max"`
	ServerDelivered uint64         `json:"server_delivered"`
	DropsQueueFull  uint64         `json:"server_drops_queue_full"`
	DropsSlow       uint64         `json:"server_drops_slow"`
	StreamsDropped  int            `json:"streams_dropped"`
	StreamsLost     int            `json:"streams_with_lost_frames"`
	FramesLost      int64          `json:"frames_lost"`
	FramesExtra     int64          `json:"frames_unexpected"`
}

type fanoutResults struct {
	Sizes []*fanoutSizeResult `json:"sizes"`
	Stall *stallResult        `json:"stalled_reader"`
}

// fanPhase receives every stream's frames during one measured phase.
type fanPhase struct {
	lat    atomicHist
	frames atomic.Int64
	bytes  atomic.Int64
	last   atomic.Int64 // UnixNano of the latest frame
}

func (p *fanPhase) frame(now, lastUpdated time.Time, size int) {
	p.frames.Add(1)
	p.bytes.Add(int64(size))
	if !lastUpdated.IsZero() {
		p.lat.add(now.Sub(lastUpdated))
	}
	n := now.UnixNano()
	for {
		l := p.last.Load()
		if n <= l || p.last.CompareAndSwap(l, n) {
			return
		}
	}
}

// changer makes one change that every stream receives as one frame: a
// commit in the room, or a publish on the bare SSE server.
type changer interface {
	step(ctx context.Context) error
}

// fanDriver changes one task: the worker asks a question
// (handoff_request_input → input_required) and the owner answers it
// (tasks/update → working). Each step is one commit and one notification.
type fanDriver struct {
	owner, worker *mcpClient
	task          handoff
	key           int
	pending       string
}

func (d *fanDriver) step(ctx context.Context) error {
	if d.pending == "" {
		d.key++
		k := "q" + strconv.Itoa(d.key)
		err := d.worker.handoffAction(ctx, "handoff_request_input", d.task.ID, map[string]any{
			"requests": []map[string]any{{"key": k, "message": "carry on?"}}})
		if err == nil {
			d.pending = k
		}
		return err
	}
	err := d.owner.taskAnswer(ctx, d.task.TaskID, d.pending)
	if err == nil {
		d.pending = ""
	}
	return err
}

// fanRoom is one server prepared for fan-out: its tasks, drivers and
// streams. The server is a room, or the bare SSE baseline, which is driven
// and read by exactly the same code so that the two sets of figures differ
// only by what the servers do.
type fanRoom struct {
	e         *env
	c         *ceServer   // the server process (for the bare SSE server only its pid and ingress URL are set)
	rc        *roomClient // nil for the bare SSE server
	drivers   []changer
	listeners []session
	perSess   int
	taskIDs   []string
	streams   []*listenStream
	recv      receiver // reads the streams; made by the first open
	sink      atomic.Pointer[frameSink]
	committed atomic.Int64 // changes committed since the streams opened
	opened    atomic.Int64 // streams acknowledged so far (progress lines)
	liveHint  atomic.Int64 // open streams, refreshed while a max phase runs
	// pending reports batches the server has accepted but not fanned out
	// yet; nil when it has no such queue.
	pending func(context.Context) (int, error)
	// discarded reports frames the server threw away without ending the
	// stream (the bare server's drop-when-full); nil for the room, which
	// drops streams, not frames.
	discarded func(context.Context) (int64, error)
}

func newFanRoom(ctx context.Context, e *env, c *ceServer, tasks, streams, perSession int) (*fanRoom, error) {
	f := &fanRoom{e: e, c: c, rc: newRoomClient(c, 16), perSess: perSession}
	f.pending = func(ctx context.Context) (int, error) {
		m, err := c.metrics(ctx)
		return m.Listen.Pending, err
	}
	owners, err := f.rc.sessions(ctx, "fan-owner", 1, "read", "propose")
	if err != nil {
		return nil, err
	}
	workers, err := f.rc.sessions(ctx, "fan-worker", 1, "read", "checkout")
	if err != nil {
		return nil, err
	}
	nl := (streams + perSession - 1) / perSession
	if f.listeners, err = f.rc.sessions(ctx, "fan-listener", nl, "read", "admin"); err != nil {
		return nil, err
	}
	owner, worker := f.rc.mcp(owners[0]), f.rc.mcp(workers[0])
	for i := range tasks {
		h, err := owner.createHandoff(ctx, fmt.Sprintf("fan-out task %d", i), workers[0].ParticipantID)
		if err != nil {
			return nil, fmt.Errorf("fan-out setup: create: %w", err)
		}
		if err := worker.handoffAction(ctx, "handoff_accept", h.ID, nil); err != nil {
			return nil, fmt.Errorf("fan-out setup: accept: %w", err)
		}
		f.drivers = append(f.drivers, &fanDriver{owner: owner, worker: worker, task: h})
		f.taskIDs = append(f.taskIDs, h.TaskID)
	}
	return f, nil
}

// open starts n streams, 64 at a time, each following every task, read
// by the run's receiver (--receiver).
func (f *fanRoom) open(ctx context.Context, n int) error {
	addr, err := hostPort(f.c.ingressURL)
	if err != nil {
		return err
	}
	if f.recv == nil {
		if f.recv, err = newReceiver(f.e.cfg.receiver); err != nil {
			return err
		}
	}
	base := len(f.streams)
	out := make([]*listenStream, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			idx := base + i
			s, err := f.recv.open(ctx, listenOptions{addr: addr, token: f.listeners[idx/f.perSess].Token, id: idx + 1, taskIDs: f.taskIDs}, &f.sink)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			out[i] = s
			f.opened.Add(1)
		})
	}
	wg.Wait()
	for _, s := range out {
		if s != nil {
			f.streams = append(f.streams, s)
		}
	}
	return first
}

// closeAll closes every stream, waits for their readers, and stops the
// receiver.
func (f *fanRoom) closeAll() {
	for _, s := range f.streams {
		s.close(false)
	}
	for _, s := range f.streams {
		<-s.done
	}
	if f.recv != nil {
		f.recv.stop()
	}
	if f.rc != nil {
		f.rc.close()
	}
}

// live counts streams still open.
func (f *fanRoom) live() int {
	n := 0
	for _, s := range f.streams {
		if s.state.Load() == streamOpen {
			n++
		}
	}
	return n
}

// settled reports whether every open stream has received every committed
// change. On a server that discards frames (the bare baseline) the streams
// together are owed every change minus what it discarded, in total.
func (f *fanRoom) settled(ctx context.Context) bool {
	want := f.committed.Load()
	if f.discarded != nil {
		lost, err := f.discarded(ctx)
		if err != nil {
			return true // the server is gone: nothing more will arrive
		}
		var got, open int64
		for _, s := range f.streams {
			if s.state.Load() == streamOpen {
				got += s.frames.Load()
				open++
			}
		}
		return got+lost >= want*open
	}
	for _, s := range f.streams {
		if s.state.Load() == streamOpen && s.frames.Load() < want {
			return false
		}
	}
	return true
}

// waitSettled waits until every open stream has caught up, or until timeout
// (by then the room's lag bound has dropped any stream that was merely
// slow, so a stream still open and short has lost frames).
func (f *fanRoom) waitSettled(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for !f.settled(ctx) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// drive runs every driver until d has passed or halt ends. With rate > 0
// the drivers share that many changes per second; otherwise they go as fast
// as the window allows: no more than fanoutWindow changes ahead of the
// average stream. Requests use ctx, not halt: a change cancelled in flight
// may still commit, and then the bench would not know to expect its frame.
func (f *fanRoom) drive(ctx, halt context.Context, d time.Duration, rate float64, phase *fanPhase) {
	deadline := time.Now().Add(d)
	base := f.committed.Load()
	baseFrames := phase.frames.Load()
	var wg sync.WaitGroup
	for _, dr := range f.drivers {
		wg.Go(func() {
			var interval time.Duration
			if rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(len(f.drivers)) / rate)
			}
			next := time.Now().Add(-interval) // the first change goes at once
			for halt.Err() == nil && time.Now().Before(deadline) {
				if rate > 0 {
					next = next.Add(interval)
					if time.Since(next) > interval {
						next = time.Now() // fell behind: do not burst to catch up
					}
					if !sleepUntil(halt, next, deadline) {
						return
					}
				} else {
					for halt.Err() == nil && time.Now().Before(deadline) {
						live := max(f.liveHint.Load(), 1)
						ahead := (f.committed.Load() - base) - (phase.frames.Load()-baseFrames)/live
						if ahead < fanoutWindow {
							break
						}
						time.Sleep(200 * time.Microsecond)
					}
					if halt.Err() != nil || !time.Now().Before(deadline) {
						return
					}
				}
				if err := dr.step(ctx); err != nil {
					f.e.fault(ctx, "fan-out change", err)
					return
				}
				f.committed.Add(1)
			}
		})
	}
	wg.Wait()
}

// measure runs one phase and waits for its frames to arrive.
func (f *fanRoom) measure(ctx context.Context, mode string, d time.Duration, rate float64) fanPhaseResult {
	phase := &fanPhase{}
	var sink frameSink = phase
	f.sink.Store(&sink)
	defer f.sink.Store(nil)
	f.liveHint.Store(int64(f.live()))
	stopHint := f.trackLive()
	c0 := f.committed.Load()
	var lost0 int64
	if f.discarded != nil {
		lost0, _ = f.discarded(ctx)
	}
	cpu := startCPU(f.c)
	start := time.Now()
	f.drive(ctx, ctx, d, rate, phase)
	driven := time.Since(start)
	var backlog struct {
		pending        int
		send, recv     int64
		framesExpected int64
	}
	backlog.framesExpected = (f.committed.Load()-c0)*int64(f.live()) - phase.frames.Load()
	if port, err := hostPort(f.c.ingressURL); err == nil {
		if _, p, ok := strings.Cut(port, ":"); ok {
			n, _ := strconv.Atoi(p)
			backlog.send, backlog.recv = loopbackQueues(n)
		}
	}
	if f.pending != nil {
		backlog.pending, _ = f.pending(ctx)
	}
	f.waitSettled(ctx, 30*time.Second)
	use := cpu.stop()
	stopHint()
	r := fanPhaseResult{Mode: mode, Seconds: driven.Seconds(), Changes: f.committed.Load() - c0, Frames: phase.frames.Load(),
		Latency: phase.lat.snapshot().summary(), CPU: use, HubPending: backlog.pending,
		ServerSendQKB: float64(backlog.send) / 1024, ClientRecvQKB: float64(backlog.recv) / 1024, FramesBehindEnd: backlog.framesExpected}
	r.ChangesPerSec = float64(r.Changes) / r.Seconds
	if r.Frames > 0 {
		r.MeanFrameBytes = float64(phase.bytes.Load()) / float64(r.Frames)
		r.ServerCPUPerDeliveryUs = use.perRequestUs(r.Frames)
		if use.BenchSeconds >= minCPUForCost {
			r.BenchCPUPerDeliveryUs = 1e6 * use.BenchSeconds / float64(r.Frames)
		}
	}
	if f.discarded != nil {
		if lost1, err := f.discarded(ctx); err == nil {
			r.FramesDropped = lost1 - lost0
		}
	}
	// Over the driving time, or until the last frame arrived if that was
	// later (the backlog drained after the drivers stopped).
	span := driven
	if last := phase.last.Load(); last > 0 {
		span = max(span, time.Unix(0, last).Sub(start))
	}
	r.DeliveriesPerSec = float64(r.Frames) / span.Seconds()
	return r
}

// trackLive refreshes liveHint every 100 ms (scanning 10,000 streams on
// every driver step would cost more than the step).
func (f *fanRoom) trackLive() func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f.liveHint.Store(int64(f.live()))
			case <-stop:
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

// account checks every stream against what it should have received and
// records lost frames and unexpected ends.
func (f *fanRoom) account(ctx context.Context, label string, r *fanoutSizeResult) {
	want := f.committed.Load()
	for _, s := range f.streams {
		got := s.frames.Load()
		switch s.state.Load() {
		case streamOpen:
			if got < want {
				r.StreamsLost++
				r.FramesLost += want - got
			} else if got > want {
				r.FramesExtra += got - want
			}
		case streamDropped:
			r.StreamsDropped++
		case streamGraceful:
			f.e.faults.add("fan-out", label+": a stream ended gracefully while nothing asked it to")
		case streamBroken:
			f.e.faults.add("fan-out", fmt.Sprintf("%s: stream broken: %v", label, s.err))
		}
		if o := s.other.Load(); o > 0 {
			f.e.faults.add("fan-out", fmt.Sprintf("%s: %d frames of an unexpected kind", label, o))
		}
	}
	if r.StreamsLost > 0 {
		f.e.rep.violation(fmt.Sprintf("fan-out %s: %d streams that were not dropped lost %d frames", label, r.StreamsLost, r.FramesLost))
	}
	if r.FramesExtra > 0 {
		f.e.rep.violation(fmt.Sprintf("fan-out %s: streams received %d frames more than the changes committed", label, r.FramesExtra))
	}
}

// scenarioFanout runs each stream count on a fresh room, then the
// stalled-reader test on a room with a short lag bound.
func scenarioFanout(ctx context.Context, e *env) error {
	res := &fanoutResults{}
	e.rep.Fanout = res
	for _, n := range e.cfg.fanoutSizes {
		r, err := fanoutSize(ctx, e, n)
		if err != nil {
			return fmt.Errorf("fan-out %d streams: %w", n, err)
		}
		res.Sizes = append(res.Sizes, r)
		e.rep.printFanoutSize(r)
	}
	st, err := fanoutStall(ctx, e)
	if err != nil {
		return fmt.Errorf("fan-out stalled reader: %w", err)
	}
	res.Stall = st
	e.rep.printStall(st)
	return nil
}

func fanoutSize(ctx context.Context, e *env, n int) (*fanoutSizeResult, error) {
	per := e.cfg.streamsPerSession
	c, err := e.room(ctx, fmt.Sprintf("fanout-%d", n), false, "--streams-per-session", strconv.Itoa(per))
	if err != nil {
		return nil, err
	}
	defer e.release(c)
	f, err := newFanRoom(ctx, e, c, fanoutTasks, n, per)
	if err != nil {
		return nil, err
	}
	defer f.closeAll()
	r := &fanoutSizeResult{Streams: n, Receiver: e.cfg.receiver}
	time.Sleep(200 * time.Millisecond) // let the setup's garbage settle before the RSS reading
	if r.RSSBeforeKB, err = c.rssKB(); err != nil {
		return nil, err
	}
	m0, err := c.metrics(ctx)
	if err != nil {
		return nil, err
	}
	e.waitQuiet(ctx, fmt.Sprintf("fan-out %d", n))
	e.logf("fan-out: opening %d streams", n)
	t0 := time.Now()
	progressDone := e.progressTicker(ctx, "fan-out open", func() string { return fmt.Sprintf("%d of %d streams open", f.opened.Load(), n) })
	err = f.open(ctx, n)
	progressDone()
	if err != nil {
		return nil, fmt.Errorf("opening streams (%d of %d open): %w", len(f.streams), n, err)
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	time.Sleep(500 * time.Millisecond)
	if r.RSSAfterKB, err = c.rssKB(); err != nil {
		return nil, err
	}
	r.RSSPerStreamKB = float64(r.RSSAfterKB-r.RSSBeforeKB) / float64(n)
	e.logf("fan-out: %d streams open in %.1fs, %.1f KiB RSS each; %s at %.0f changes/s", n, r.OpenSeconds, r.RSSPerStreamKB,
		e.cfg.fanoutDuration, e.cfg.fanoutRate)
	r.Steady = f.measure(ctx, fmt.Sprintf("steady %.0f changes/s", e.cfg.fanoutRate), e.cfg.fanoutDuration, e.cfg.fanoutRate)
	e.logf("fan-out: %d streams, as fast as a %d-change window allows for %s", n, fanoutWindow, e.cfg.fanoutDuration)
	r.Max = f.measure(ctx, fmt.Sprintf("max (window %d)", fanoutWindow), e.cfg.fanoutDuration, 0)
	m1, err := c.metrics(ctx)
	if err != nil {
		return nil, err
	}
	r.ServerDelivered = m1.Listen.Delivered - m0.Listen.Delivered
	r.DropsQueueFull = m1.Listen.DroppedQueueFull - m0.Listen.DroppedQueueFull
	r.DropsSlow = m1.Listen.DroppedSlow - m0.Listen.DroppedSlow
	f.account(ctx, fmt.Sprintf("%d streams", n), r)
	e.rep.compareFanout(r)
	return r, ctx.Err()
}
