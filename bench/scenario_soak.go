package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/room"
)

// The soak (issue 13 item 15): one `ce serve` run for a long time under a
// mixed, paced load — agents joining and leaving, listen streams opening,
// stalling and closing, handoffs through every state (expiry included,
// with a short --task-ttl), proposals reviewed and committed, the Markdown
// file edited from outside — while the room's RSS, goroutines, open
// descriptors and sidecar size are sampled. The figures are start, end and
// slope after a warm-up; the run fails only on a broken invariant (an
// unexpected error, a stream the room does not release, the task cap, a
// lost outside edit, a task not expired), never on a figure.

// soakPlan is the soak's shape, from the flags (--smoke shortens it).
type soakPlan struct {
	duration, sampleEvery, warmup time.Duration
	taskTTL, maxLag               time.Duration
	rate                          float64 // handoff lifecycles per second, all lanes together
	lanes                         int     // handoff lanes
	streams                       int     // listen streams the bench keeps open at once
	hotTasks                      int     // tasks whose changes feed the streams
	changeEvery                   time.Duration
	proposeEvery                  time.Duration
	editEvery                     time.Duration
	leaveEvery                    time.Duration
	healthyHold, stalledHold      [2]time.Duration
}

func soakPlanFor(cfg config) soakPlan {
	p := soakPlan{
		duration: cfg.soakDuration, sampleEvery: cfg.soakSample, warmup: cfg.soakWarmup,
		taskTTL: cfg.soakTaskTTL, maxLag: 2 * time.Second, rate: cfg.soakRate,
		lanes: 8, streams: 16, hotTasks: 4, changeEvery: 125 * time.Millisecond,
		proposeEvery: time.Second, editEvery: 3 * time.Second, leaveEvery: 2 * time.Second,
		healthyHold: [2]time.Duration{time.Second, 8 * time.Second},
		stalledHold: [2]time.Duration{5 * time.Second, 20 * time.Second},
	}
	if cfg.smoke {
		p.lanes, p.streams = 4, 8
		p.proposeEvery, p.editEvery, p.leaveEvery = 500*time.Millisecond, 2*time.Second, time.Second
		p.healthyHold = [2]time.Duration{500 * time.Millisecond, 3 * time.Second}
		p.stalledHold = [2]time.Duration{2 * time.Second, 5 * time.Second}
	}
	if p.warmup <= 0 {
		// "auto": a tenth of the run, but at least two task TTLs (terminal
		// task rows are purged one TTL after they end, so their count
		// levels off only then), and at most half the run.
		p.warmup = min(max(p.duration/10, 2*p.taskTTL, 5*time.Second), p.duration/2)
	}
	return p
}

// soakIdle is the room at rest: no stream, no request in flight, the
// bench's keep-alive connections closed. Before and after the load, the
// two should match; what does not come back is what the load left behind.
type soakIdle struct {
	Goroutines  int64 `json:"goroutines"`
	FDs         int   `json:"open_fds"`
	RSSKB       int64 `json:"rss_kb"`
	HeapBytes   int64 `json:"heap_live_bytes"`
	Subscribers int   `json:"subscribers"`
	// FDKinds is the open descriptors by kind (see fdKinds).
	FDKinds map[string]int `json:"open_fds_by_kind"`
}

type soakResult struct {
	Seconds      float64 `json:"seconds"`
	Warmup       string  `json:"warmup"`
	SampleEvery  string  `json:"sample_every"`
	TaskTTL      string  `json:"task_ttl"`
	ListenMaxLag string  `json:"listen_max_lag"`
	Rate         float64 `json:"lifecycles_per_sec_requested"`
	Lanes        int     `json:"handoff_lanes"`
	Streams      int     `json:"streams_target"`

	Samples        []soakSample     `json:"samples"`
	Trends         []soakTrend      `json:"trends"`
	IdleBefore     soakIdle         `json:"idle_before_load"`
	IdleAfter      soakIdle         `json:"idle_after_load"`
	Ops            map[string]int64 `json:"operations"`
	MaxActiveTasks int              `json:"max_active_tasks"`
	CapSamples     int              `json:"active_task_samples"`
	// The sidecar once the room stopped: rows per table, and the bytes of
	// document text the versions hold (every version is kept).
	Rows map[string]int64 `json:"sidecar_rows_at_end"`
	// DBKiBPerHandoff is the db file's growth after the warm-up divided by
	// the handoffs created meanwhile: handoffs are kept for good, so this is
	// what a room's sidecar costs per unit of work.
	DBKiBPerHandoff float64  `json:"db_kib_per_handoff_after_warmup"`
	VersionBytes    int64    `json:"version_text_bytes_at_end"`
	VersionStored   int64    `json:"version_stored_bytes_at_end"` // the chunks those texts are stored as (compressed, each once)
	OutsideEdits    int      `json:"outside_edits"`
	LostEdits       []string `json:"outside_edits_lost"`
	StreamsNotEnd   int      `json:"streams_held_after_every_client_closed"`
	// GoroutinesLeft is idle-after minus idle-before by the function each
	// goroutine started in: what the load left behind, by name.
	GoroutinesLeft map[string]int `json:"goroutines_left_by_entry_function"`
	CPU            cpuUse         `json:"cpu"`
}

// soakOps counts what the load did, by name, for the report.
type soakOps struct {
	mu sync.Mutex
	m  map[string]int64
}

func (o *soakOps) add(name string, n int64) {
	o.mu.Lock()
	if o.m == nil {
		o.m = map[string]int64{}
	}
	o.m[name] += n
	o.mu.Unlock()
}

func (o *soakOps) get(name string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[name]
}

func (o *soakOps) snapshot() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int64, len(o.m))
	for k, v := range o.m {
		out[k] = v
	}
	return out
}

// The operations every soak must have done at least once: a run that never
// reached a state has not soaked it.
var soakMustHappen = []string{
	"handoff created", "handoff accepted", "input requested", "input answered (tasks/update)",
	"handoff completed", "result approved", "result rejected", "task cancelled (accepted)",
	"task cancelled (open)", "task expired by the sweeper", "proposal proposed", "proposal approved",
	"proposal rejected", "proposal committed", "outside edit saved", "agent joined", "agent left",
	"stream opened", "stream closed by the bench", "stalled stream opened", "stream ended by a leave",
}

// soakRun is one soak in progress.
type soakRun struct {
	e    *env
	c    *ceServer
	rc   *roomClient
	p    soakPlan
	addr string
	ops  soakOps

	stop    chan struct{} // closed when the lanes must wind down
	start   time.Time
	hot     atomic.Pointer[[]string] // the driver's task ids, for new streams
	streams sync.WaitGroup           // one per stream goroutine
	openNow atomic.Int64
	nextID  atomic.Int64 // listen request ids

	mu      sync.Mutex
	markers []string  // every outside edit's marker, in order
	gone    sync.Once // the sidecar vanished under the room (reported once)
}

func (s *soakRun) running() bool {
	select {
	case <-s.stop:
		return false
	default:
		return true
	}
}

// pause waits d, or less if the soak is stopping. It paces the load; it
// never waits for a condition.
func (s *soakRun) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stop:
	case <-ctx.Done():
	}
}

func between(rng *rand.Rand, r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
}

// participant mints a one-use invitation and joins with it, as an agent
// given its own link would (no per-invitation cap can then refuse a lane).
func (s *soakRun) participant(ctx context.Context, name string, caps ...string) (session, *mcpClient, error) {
	var g struct {
		URI string `json:"uri"`
	}
	if err := s.c.ownerCall(ctx, http.MethodPost, "/workspace/invite", map[string]any{
		"capabilities": caps, "max_uses": 1, "expires_in_minutes": 600,
	}, &g); err != nil {
		return session{}, nil, fmt.Errorf("invite %v: %w", caps, err)
	}
	ss, err := join(ctx, s.rc.hc, s.c.ingressURL, g.URI, name)
	if err != nil {
		return session{}, nil, err
	}
	s.ops.add("agent joined", 1)
	return ss, s.rc.mcp(ss), nil
}

func toolCode(err error) string {
	var te *toolError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// expiredUnderneath reports whether a step failed because the sweeper
// expired the handoff's task first (its TTL ran out mid-lifecycle on a slow
// machine): an expected outcome with a short --task-ttl, not a fault.
func (s *soakRun) expiredUnderneath(ctx context.Context, who *mcpClient, id string) bool {
	r, err := who.tool(ctx, "handoff_get", map[string]any{"handoff_id": id})
	if err != nil {
		return false
	}
	var h struct {
		Status       string  `json:"status"`
		CancelReason *string `json:"cancel_reason"`
	}
	json.Unmarshal(r.StructuredContent, &h)
	return h.Status == "cancelled" && h.CancelReason != nil && *h.CancelReason == "task_expired"
}

// step runs one lifecycle step; a failure is a fault unless the task
// expired underneath it. It reports whether the lifecycle may go on.
func (s *soakRun) step(ctx context.Context, name string, owner *mcpClient, h handoff, do func() error) bool {
	err := do()
	if err == nil {
		s.ops.add(name, 1)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if s.expiredUnderneath(ctx, owner, h.ID) {
		s.ops.add("task expired mid-lifecycle (slow machine)", 1)
		return false
	}
	s.e.fault(ctx, "soak "+name, err)
	return false
}

// lane is one handoff lane: a creator, a worker and an approver going
// through lifecycles at a paced rate, each lifecycle reaching one of the
// end states.
type lane struct {
	creator, worker, approver *mcpClient
	workerID                  string
}

func (s *soakRun) handoffLane(ctx context.Context, i int, l lane, every time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(s.start.UnixNano())))
	next := time.Now()
	for k := 0; s.running() && ctx.Err() == nil; k++ {
		s.lifecycle(ctx, rng, l, fmt.Sprintf("soak %d/%d", i, k))
		next = next.Add(every)
		if d := time.Until(next); d > 0 {
			s.pause(ctx, d)
		} else {
			next = time.Now() // behind: do not burst to catch up
		}
	}
}

func (s *soakRun) lifecycle(ctx context.Context, rng *rand.Rand, l lane, summary string) {
	const (
		approve = iota
		reject
		cancelAccepted
		cancelOpen
		openCall // no assignee: whoever has checkout takes it
	)
	plan := []int{approve, approve, approve, reject, reject, cancelAccepted, cancelOpen, openCall}[rng.IntN(8)]
	assignee := l.workerID
	if plan == openCall {
		assignee = ""
	}
	h, err := l.creator.createHandoff(ctx, summary, assignee)
	switch {
	case isLimitExceeded(err):
		s.ops.add("create refused: limit_exceeded (expected at the cap)", 1)
		return
	case err != nil:
		s.e.fault(ctx, "soak create", err)
		return
	}
	s.ops.add("handoff created", 1)
	if plan == cancelOpen {
		s.step(ctx, "task cancelled (open)", l.creator, h, func() error { return l.creator.taskCancel(ctx, h.TaskID) })
		return
	}
	if !s.step(ctx, "handoff accepted", l.creator, h, func() error {
		return l.worker.handoffAction(ctx, "handoff_accept", h.ID, nil)
	}) {
		return
	}
	for q := range rng.IntN(3) {
		key := fmt.Sprintf("q%d", q)
		if !s.step(ctx, "input requested", l.creator, h, func() error {
			return l.worker.handoffAction(ctx, "handoff_request_input", h.ID, map[string]any{
				"requests": []map[string]any{{"key": key, "message": "carry on?"}}})
		}) {
			return
		}
		if !s.step(ctx, "input answered (tasks/update)", l.creator, h, func() error { return l.creator.taskAnswer(ctx, h.TaskID, key) }) {
			return
		}
	}
	if plan == cancelAccepted {
		s.step(ctx, "task cancelled (accepted)", l.creator, h, func() error { return l.creator.taskCancel(ctx, h.TaskID) })
		return
	}
	if !s.step(ctx, "handoff completed", l.creator, h, func() error {
		return l.worker.handoffAction(ctx, "handoff_complete", h.ID, completeArgs)
	}) {
		return
	}
	if plan == reject {
		s.step(ctx, "result rejected", l.creator, h, func() error { return l.approver.handoffAction(ctx, "handoff_reject", h.ID, nil) })
		return
	}
	s.step(ctx, "result approved", l.creator, h, func() error { return l.approver.handoffAction(ctx, "handoff_approve", h.ID, nil) })
}

// expireLane hands work to an assignee who never takes it: the sweeper must
// expire each task one TTL after its creation (the task fails, the handoff
// is cancelled with task_expired). It stops creating early enough that the
// last ones expire within the run.
func (s *soakRun) expireLane(ctx context.Context, owner *mcpClient, assigneeID string, done chan<- error) {
	type pending struct {
		h  handoff
		at time.Time
	}
	var list []pending
	lastCreate := s.start.Add(s.p.duration - s.p.taskTTL - 5*time.Second)
	// The sweeper wakes at the earliest expiry (at most every 30 s), so
	// 30 s past the TTL is generous; later is a broken rule, not a slow one.
	const grace = 30 * time.Second
	for ctx.Err() == nil {
		now := time.Now()
		if s.running() && len(list) < 2 && now.Before(lastCreate) {
			h, err := owner.createHandoff(ctx, "nobody will take this", assigneeID)
			switch {
			case isLimitExceeded(err):
				s.ops.add("create refused: limit_exceeded (expected at the cap)", 1)
			case err != nil:
				s.e.fault(ctx, "soak expire lane create", err)
			default:
				s.ops.add("handoff created", 1)
				list = append(list, pending{h, now})
			}
		}
		kept := list[:0]
		for _, p := range list {
			if now.Sub(p.at) < s.p.taskTTL {
				kept = append(kept, p)
				continue
			}
			if s.expiredUnderneath(ctx, owner, p.h.ID) {
				s.ops.add("task expired by the sweeper", 1)
				continue
			}
			if now.Sub(p.at) > s.p.taskTTL+grace {
				s.e.rep.violation(fmt.Sprintf("soak: handoff %s was not expired %s after its creation (--task-ttl %s)",
					p.h.ID, now.Sub(p.at).Round(time.Second), s.p.taskTTL))
				continue
			}
			kept = append(kept, p)
		}
		list = kept
		if !s.running() && len(list) == 0 {
			break
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	done <- nil
}

// hotSlot is one task the driver keeps changing so that streams have
// frames to carry (and a stalled reader has frames to fall behind on).
type hotSlot struct {
	owner   *mcpClient
	h       handoff
	born    time.Time
	key     int
	pending string
}

// driverLane keeps p.hotTasks accepted tasks changing (a question, then its
// answer) and retires each well before its TTL (complete, approve), so the
// set of followed tasks keeps turning over as in a real room.
func (s *soakRun) driverLane(ctx context.Context, owners []*mcpClient, worker *mcpClient, workerID string) {
	slots := make([]*hotSlot, len(owners))
	fresh := func(i int) bool {
		h, err := owners[i].createHandoff(ctx, fmt.Sprintf("hot task %d", i), workerID)
		if isLimitExceeded(err) {
			s.ops.add("create refused: limit_exceeded (expected at the cap)", 1)
			return false
		}
		if err != nil {
			s.e.fault(ctx, "soak driver create", err)
			return false
		}
		s.ops.add("handoff created", 1)
		if err := worker.handoffAction(ctx, "handoff_accept", h.ID, nil); err != nil {
			s.e.fault(ctx, "soak driver accept", err)
			return false
		}
		s.ops.add("handoff accepted", 1)
		slots[i] = &hotSlot{owner: owners[i], h: h, born: time.Now()}
		return true
	}
	publish := func() {
		var ids []string
		for _, sl := range slots {
			if sl != nil {
				ids = append(ids, sl.h.TaskID)
			}
		}
		s.hot.Store(&ids)
	}
	retire := func(sl *hotSlot) {
		if sl.pending != "" && !s.step(ctx, "input answered (tasks/update)", sl.owner, sl.h, func() error {
			return sl.owner.taskAnswer(ctx, sl.h.TaskID, sl.pending)
		}) {
			return
		}
		if s.step(ctx, "handoff completed", sl.owner, sl.h, func() error {
			return worker.handoffAction(ctx, "handoff_complete", sl.h.ID, completeArgs)
		}) {
			s.step(ctx, "result approved", sl.owner, sl.h, func() error { return sl.owner.handoffAction(ctx, "handoff_approve", sl.h.ID, nil) })
		}
	}
	for i := range slots {
		fresh(i)
	}
	publish()
	tick := time.NewTicker(s.p.changeEvery)
	defer tick.Stop()
	for k := 0; s.running() && ctx.Err() == nil; k++ {
		i := k % len(slots)
		sl := slots[i]
		switch {
		case sl == nil:
			fresh(i)
			publish()
		case time.Since(sl.born) > s.p.taskTTL/2:
			retire(sl)
			slots[i] = nil
			fresh(i)
			publish()
		case sl.pending == "":
			sl.key++
			k := fmt.Sprintf("h%d", sl.key)
			if s.step(ctx, "input requested", sl.owner, sl.h, func() error {
				return worker.handoffAction(ctx, "handoff_request_input", sl.h.ID, map[string]any{
					"requests": []map[string]any{{"key": k, "message": "still on it?"}}})
			}) {
				sl.pending = k
			} else {
				slots[i] = nil
			}
		default:
			if s.step(ctx, "input answered (tasks/update)", sl.owner, sl.h, func() error {
				return sl.owner.taskAnswer(ctx, sl.h.TaskID, sl.pending)
			}) {
				sl.pending = ""
			} else {
				slots[i] = nil
			}
		}
		select {
		case <-tick.C:
		case <-s.stop:
		case <-ctx.Done():
		}
	}
	for _, sl := range slots {
		if sl != nil && ctx.Err() == nil {
			retire(sl)
		}
	}
}

// listenerLane keeps about p.streams listen streams open on a few sessions:
// most read for a while and close; one in five stops reading (a tiny
// receive buffer, never read) and is held until the room drops it or the
// hold ends. Every stream the bench closes must be released by the room.
func (s *soakRun) listenerLane(ctx context.Context, sessions []session, perSession int) {
	rng := rand.New(rand.NewPCG(7, uint64(s.start.UnixNano())))
	held := make([]atomic.Int64, len(sessions))
	for s.running() && ctx.Err() == nil {
		if int(s.openNow.Load()) >= s.p.streams {
			s.pause(ctx, 50*time.Millisecond)
			continue
		}
		// One stream of headroom per session: the room counts a closed
		// stream until it notices the connection is gone.
		k := -1
		for i := range sessions {
			if held[i].Load() < int64(perSession-1) {
				k = i
				break
			}
		}
		ids := s.hot.Load()
		if k < 0 || ids == nil || len(*ids) == 0 {
			s.pause(ctx, 50*time.Millisecond)
			continue
		}
		stall := rng.IntN(5) == 0
		hold := between(rng, s.p.healthyHold)
		if stall {
			hold = between(rng, s.p.stalledHold)
		}
		held[k].Add(1)
		s.openNow.Add(1)
		s.streams.Add(1)
		go func() {
			defer s.streams.Done()
			defer s.openNow.Add(-1)
			defer held[k].Add(-1)
			s.holdStream(ctx, sessions[k], *ids, stall, hold)
		}()
		s.pause(ctx, time.Duration(rng.IntN(100))*time.Millisecond)
	}
}

// holdStream opens one stream and holds it: reading, or stalled.
func (s *soakRun) holdStream(ctx context.Context, ss session, ids []string, stall bool, hold time.Duration) {
	o := listenOptions{addr: s.addr, token: ss.Token, id: int(s.nextID.Add(1)), taskIDs: ids}
	if stall {
		o.rcvBuf = 2048
	}
	st, err := openListen(ctx, o)
	if err != nil {
		// A task the driver retired may have been purged in between (it is
		// then missing from the acknowledgement): not a fault, try again.
		if strings.Contains(err.Error(), "acknowledged") {
			s.ops.add("stream not opened: a followed task was purged meanwhile", 1)
			return
		}
		// The room releases a stream the client closed a moment later (when
		// it notices the connection is gone); a session that opens a new one
		// at once can find its previous one still counted. Counted, not a
		// fault: streams the room never releases are caught at the end.
		if isStreamLimit(err) {
			s.ops.add("stream refused: the session's closed stream not yet released", 1)
			return
		}
		s.e.fault(ctx, "soak listen open", err)
		return
	}
	if !stall {
		s.ops.add("stream opened", 1)
		go st.read()
		s.wait(ctx, hold, st.done)
		st.close(true)
		s.ops.add("frames received", st.frames.Load())
		s.account(ctx, st)
		return
	}
	s.ops.add("stalled stream opened", 1)
	clientPort, serverPort := st.ports()
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) && s.running() && ctx.Err() == nil {
		if state, _, ok := serverSocket(serverPort, clientPort); !ok || state != "ESTABLISHED" {
			s.ops.add("stalled stream dropped by the room", 1)
			break
		}
		s.pause(ctx, 250*time.Millisecond)
	}
	st.close(false)
	s.ops.add("stream closed by the bench", 1)
}

func isStreamLimit(err error) bool {
	var re *rpcError
	return errors.As(err, &re) && re.Status == http.StatusTooManyRequests && strings.Contains(re.Body, "limit_exceeded")
}

// wait waits d, for the stream to end, or for the soak to stop.
func (s *soakRun) wait(ctx context.Context, d time.Duration, ended <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ended:
	case <-s.stop:
	case <-ctx.Done():
	}
}

// account records how a reading stream ended.
func (s *soakRun) account(ctx context.Context, st *listenStream) {
	switch st.state.Load() {
	case streamClosed, streamOpen:
		s.ops.add("stream closed by the bench", 1)
	case streamDropped:
		// The room may drop a reader starved of CPU; counted, read with
		// the machine's load, never a fault.
		s.ops.add("reading stream dropped by the room", 1)
	case streamGraceful:
		s.ops.add("reading stream ended by the room", 1)
	case streamBroken:
		s.e.fault(ctx, "soak listen read", st.err)
	}
	if n := st.other.Load(); n > 0 {
		s.e.fault(ctx, "soak listen read", fmt.Errorf("%d frames of an unexpected kind on a task stream", n))
	}
}

// leaverLane is agents coming and going: each joins, reads, often opens a
// stream, and leaves with workspace_leave. Leaving must end the session's
// streams (gracefully) at once.
func (s *soakRun) leaverLane(ctx context.Context) {
	rng := rand.New(rand.NewPCG(11, uint64(s.start.UnixNano())))
	for n := 0; s.running() && ctx.Err() == nil; n++ {
		ss, m, err := s.participant(ctx, fmt.Sprintf("visitor-%d", n), "read", "admin")
		if err != nil {
			s.e.fault(ctx, "soak join", err)
			s.pause(ctx, s.p.leaveEvery)
			continue
		}
		if _, err := m.tool(ctx, "workspace_status", map[string]any{}); err != nil {
			s.e.fault(ctx, "soak workspace_status", err)
		}
		var st *listenStream
		if ids := s.hot.Load(); ids != nil && len(*ids) > 0 && rng.IntN(2) == 0 {
			st, err = openListen(ctx, listenOptions{addr: s.addr, token: ss.Token, id: int(s.nextID.Add(1)), taskIDs: *ids})
			switch {
			case err != nil && strings.Contains(err.Error(), "acknowledged"):
				s.ops.add("stream not opened: a followed task was purged meanwhile", 1)
				st = nil
			case err != nil:
				s.e.fault(ctx, "soak listen open (visitor)", err)
				st = nil
			default:
				s.ops.add("stream opened", 1)
				go st.read()
			}
		}
		s.pause(ctx, time.Duration(200+rng.IntN(800))*time.Millisecond)
		if _, err := m.tool(ctx, "workspace_leave", map[string]any{}); err != nil {
			s.e.fault(ctx, "soak workspace_leave", err)
		} else {
			s.ops.add("agent left", 1)
		}
		if st != nil {
			t := time.NewTimer(10 * time.Second)
			select {
			case <-st.done:
				if st.state.Load() == streamGraceful {
					s.ops.add("stream ended by a leave", 1)
				} else {
					s.e.rep.violation(fmt.Sprintf("soak: a stream of a session that left ended without its final result (state %d)", st.state.Load()))
				}
			case <-t.C:
				s.e.rep.violation("soak: a session left, and its listen stream was still open 10 s later")
			case <-ctx.Done():
			}
			t.Stop()
			st.close(true)
		}
		s.pause(ctx, s.p.leaveEvery)
	}
}

// proposalLane proposes a new Plan section against the version it read,
// has a reviewer approve (or now and then reject) it, and commits the
// approved ones. A commit refused with stale_version (an outside edit got
// in first) is the documented outcome, counted, not a fault.
func (s *soakRun) proposalLane(ctx context.Context, proposer, reviewer *mcpClient) {
	rng := rand.New(rand.NewPCG(13, uint64(s.start.UnixNano())))
	for k := 1; s.running() && ctx.Err() == nil; k++ {
		s.propose(ctx, rng, proposer, reviewer, k)
		s.pause(ctx, s.p.proposeEvery)
	}
}

func (s *soakRun) propose(ctx context.Context, rng *rand.Rand, proposer, reviewer *mcpClient, k int) {
	r, err := proposer.tool(ctx, "workspace_status", map[string]any{})
	if err != nil {
		s.e.fault(ctx, "soak workspace_status", err)
		return
	}
	var st struct {
		Version int64 `json:"version"`
	}
	json.Unmarshal(r.StructuredContent, &st)
	r, err = proposer.tool(ctx, "workspace_propose", map[string]any{
		"target": "Plan", "base_version": st.Version, "summary": fmt.Sprintf("plan revision %d", k),
		"change": map[string]any{"section": "Plan", "content": fmt.Sprintf("## Plan\n\nPlan revision %d from the soak.\n", k)},
	})
	if toolCode(err) == "limit_exceeded" {
		s.ops.add("propose refused: limit_exceeded", 1)
		return
	}
	if err != nil {
		s.e.fault(ctx, "soak propose", err)
		return
	}
	var pr struct {
		ProposalID string `json:"proposal_id"`
	}
	json.Unmarshal(r.StructuredContent, &pr)
	s.ops.add("proposal proposed", 1)
	approve := rng.IntN(5) != 0
	_, err = reviewer.tool(ctx, "workspace_review", map[string]any{"proposal_id": pr.ProposalID, "approve": approve})
	switch {
	case toolCode(err) == "proposal_conflict":
		s.ops.add("review refused: proposal_conflict", 1)
		return
	case err != nil:
		s.e.fault(ctx, "soak review", err)
		return
	case !approve:
		s.ops.add("proposal rejected", 1)
		return
	}
	s.ops.add("proposal approved", 1)
	_, err = reviewer.tool(ctx, "workspace_commit", map[string]any{"proposal_id": pr.ProposalID})
	switch code := toolCode(err); {
	case err == nil:
		s.ops.add("proposal committed", 1)
	case code == "stale_version" || code == "proposal_conflict":
		s.ops.add("commit refused: "+code+" (the document moved on)", 1)
	default:
		s.e.fault(ctx, "soak commit", err)
	}
}

// editLane edits the Markdown file from outside the way an editor saves
// (a temporary file renamed over it), adding a numbered line to the Notes
// section and keeping its last five. Each line must end up in a stored
// version or in the final file: an edit in neither was lost.
func (s *soakRun) editLane(ctx context.Context) {
	for n := 1; s.running() && ctx.Err() == nil; n++ {
		s.pause(ctx, s.p.editEvery)
		if !s.running() {
			return
		}
		marker := fmt.Sprintf("outside-edit-%04d", n)
		if err := saveOutsideEdit(s.c.file, marker); err != nil {
			s.e.fault(ctx, "soak outside edit", err)
			return
		}
		s.mu.Lock()
		s.markers = append(s.markers, marker)
		s.mu.Unlock()
		s.ops.add("outside edit saved", 1)
	}
}

// saveOutsideEdit rewrites the Notes section (the document's last) with
// marker appended and only the newest five outside-edit lines kept.
func saveOutsideEdit(path, marker string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(b)
	head, notes, found := strings.Cut(text, "## Notes\n")
	if !found {
		head = strings.TrimRight(text, "\n") + "\n\n"
	}
	var keep []string
	for _, l := range strings.Split(notes, "\n") {
		if strings.HasPrefix(l, "outside-edit-") {
			keep = append(keep, l)
		}
	}
	keep = append(keep, marker)
	if len(keep) > 5 {
		keep = keep[len(keep)-5:]
	}
	out := head + "## Notes\n\n" + strings.Join(keep, "\n") + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), ".soak-edit-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// soakMetrics is the part of /debug/metrics the soak samples.
type soakMetrics struct {
	Room struct {
		ActiveTasks int `json:"active_tasks"`
		LiveSess    int `json:"live_sessions"`
		Handoffs    int `json:"handoffs"`
		TaskRows    int `json:"task_rows"`
	} `json:"room"`
	Listen struct {
		Subscribers int `json:"subscribers"`
	} `json:"listen"`
	Process struct {
		Goroutines int64 `json:"goroutines"`
		HeapLive   int64 `json:"heap_live_bytes"`
		GoMapped   int64 `json:"go_mapped_bytes"`
	} `json:"process"`
}

func (s *soakRun) sample(ctx context.Context) (soakSample, error) {
	var m soakMetrics
	if err := s.c.ownerCall(ctx, http.MethodGet, "/debug/metrics", nil, &m); err != nil {
		return soakSample{}, err
	}
	out := soakSample{Goroutines: m.Process.Goroutines, HeapBytes: m.Process.HeapLive, GoMapped: m.Process.GoMapped, Subscribers: m.Listen.Subscribers,
		LiveSessions: m.Room.LiveSess, ActiveTasks: m.Room.ActiveTasks, Handoffs: m.Room.Handoffs, TaskRows: m.Room.TaskRows}
	if m.Process.Goroutines == 0 {
		return out, errors.New("/debug/metrics reports no goroutines: the room is older than the soak (no process block)")
	}
	var err error
	if out.RSSKB, err = s.c.rssKB(); err != nil {
		return out, err
	}
	if out.FDs, err = openFDs(s.c.pid); err != nil {
		return out, err
	}
	db := s.c.file + ".commonroom.db"
	if out.DBBytes = fileSize(db); out.DBBytes == 0 {
		// Something removed the room's files under it (a /tmp cleaner?):
		// the sizes mean nothing from here on, and the run must say so;
		// the process figures are still good and are kept.
		s.gone.Do(func() { s.e.fault(ctx, "soak sample", fmt.Errorf("the sidecar %s is gone", db)) })
	}
	out.WALBytes = fileSize(db + "-wal")
	return out, nil
}

// goroutineProfile is the room's goroutine profile in its text form.
func (s *soakRun) goroutineProfile(ctx context.Context) (map[string]int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.ownerURL+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.c.opToken)
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("goroutine profile: HTTP %d: %s", resp.StatusCode, clip(b))
	}
	m := goroutineCounts(string(b))
	total := 0
	for _, n := range m {
		total += n
	}
	return m, total, nil
}

// idle samples the room at rest: the descriptors three times, 200 ms apart,
// keeping the smallest count, and the goroutines from one goroutine profile
// (the metrics request runs a few short-lived goroutines of its own, one
// per query; the profile request runs none). The bench's own keep-alive
// connections are closed first, so both idle moments see the same one.
func (s *soakRun) idle(ctx context.Context) (soakIdle, map[string]int, error) {
	s.rc.hc.CloseIdleConnections()
	s.c.hc.CloseIdleConnections()
	time.Sleep(time.Second) // let the room's connection goroutines see the close
	var out soakIdle
	for i := range 3 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		x, err := s.sample(ctx)
		if err != nil {
			return out, nil, err
		}
		if i == 0 || x.FDs < out.FDs {
			out.FDs = x.FDs
		}
		out.RSSKB, out.HeapBytes, out.Subscribers = x.RSSKB, x.HeapBytes, x.Subscribers
	}
	out.FDKinds = fdKinds(s.c.pid)
	byEntry, total, err := s.goroutineProfile(ctx)
	out.Goroutines = int64(total)
	return out, byEntry, err
}

// fdKinds counts the process's open descriptors by what they are: a
// socket, a pipe, an epoll or other anonymous inode, or a file by its base
// name (the sidecar's db, -wal and -shm, one set per SQLite connection).
func fdKinds(pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, e := range ents {
		t, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(t, "socket:"):
			t = "socket"
		case strings.HasPrefix(t, "pipe:"):
			t = "pipe"
		case strings.HasPrefix(t, "anon_inode:"):
			t = strings.Trim(strings.TrimPrefix(t, "anon_inode:"), "[]")
		default:
			t = filepath.Base(t)
		}
		out[t]++
	}
	return out
}

// openFDs counts the process's open descriptors.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// scenarioSoak runs the soak on a room of its own.
func scenarioSoak(ctx context.Context, e *env) error {
	p := soakPlanFor(e.cfg)
	c, err := e.room(ctx, "soak", true, "--task-ttl", p.taskTTL.String(), "--listen-max-lag", p.maxLag.String(),
		"--streams-per-session", "8")
	if err != nil {
		return err
	}
	defer e.release(c)
	addr, err := hostPort(c.ingressURL)
	if err != nil {
		return err
	}
	s := &soakRun{e: e, c: c, rc: newRoomClient(c, 64), p: p, addr: addr, stop: make(chan struct{})}
	defer s.rc.close()
	res := &soakResult{Warmup: p.warmup.String(), SampleEvery: p.sampleEvery.String(), TaskTTL: p.taskTTL.String(),
		ListenMaxLag: p.maxLag.String(), Rate: p.rate, Lanes: p.lanes, Streams: p.streams}

	// The cast: every participant joins with an invitation of its own.
	lanes := make([]lane, p.lanes)
	for i := range lanes {
		var w session
		var err error
		if _, lanes[i].creator, err = s.participant(ctx, fmt.Sprintf("creator-%d", i), "read", "propose"); err != nil {
			return err
		}
		if w, lanes[i].worker, err = s.participant(ctx, fmt.Sprintf("worker-%d", i), "read", "checkout"); err != nil {
			return err
		}
		if _, lanes[i].approver, err = s.participant(ctx, fmt.Sprintf("approver-%d", i), "read", "approve"); err != nil {
			return err
		}
		lanes[i].workerID = w.ParticipantID
	}
	hotOwners := make([]*mcpClient, p.hotTasks)
	for i := range hotOwners {
		if _, hotOwners[i], err = s.participant(ctx, fmt.Sprintf("hot-owner-%d", i), "read", "propose", "approve"); err != nil {
			return err
		}
	}
	hw, hotWorker, err := s.participant(ctx, "hot-worker", "read", "checkout")
	if err != nil {
		return err
	}
	_, expOwner, err := s.participant(ctx, "expire-owner", "read", "propose")
	if err != nil {
		return err
	}
	absent, _, err := s.participant(ctx, "absent-assignee", "read", "checkout")
	if err != nil {
		return err
	}
	_, proposer, err := s.participant(ctx, "proposer", "read", "propose")
	if err != nil {
		return err
	}
	_, reviewer, err := s.participant(ctx, "reviewer", "read", "approve", "commit")
	if err != nil {
		return err
	}
	const perSession = 8
	listeners := make([]session, (p.streams+perSession-2)/(perSession-1)+1)
	for i := range listeners {
		if listeners[i], _, err = s.participant(ctx, fmt.Sprintf("listener-%d", i), "read", "admin"); err != nil {
			return err
		}
	}

	var gBefore map[string]int
	if res.IdleBefore, gBefore, err = s.idle(ctx); err != nil {
		return err
	}
	e.logf("soak: %s, sampling every %s, warm-up %s; %d handoff lanes at %.0f lifecycles/s, %d streams, --task-ttl %s",
		p.duration, p.sampleEvery, p.warmup, p.lanes, p.rate, p.streams, p.taskTTL)

	capWatch := startSampler(ctx, c, 250*time.Millisecond)
	cpu := startCPU(c)
	s.start = time.Now()
	var samples []soakSample
	var smu sync.Mutex
	samplerDone, samplerStop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(p.sampleEvery)
		defer t.Stop()
		for {
			x, err := s.sample(ctx)
			x.T = time.Since(s.start).Seconds()
			if err != nil {
				e.fault(ctx, "soak sample", err)
			} else {
				smu.Lock()
				samples = append(samples, x)
				smu.Unlock()
			}
			select {
			case <-t.C:
			case <-samplerStop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	progressDone := e.progressTicker(ctx, "soak", func() string {
		smu.Lock()
		defer smu.Unlock()
		if len(samples) == 0 {
			return "no sample yet"
		}
		x := samples[len(samples)-1]
		return fmt.Sprintf("RSS %.1f MiB, %d goroutines, %d fds, sidecar %.1f MiB, %d streams, %d lifecycles ended",
			float64(x.RSSKB)/1024, x.Goroutines, x.FDs, float64(x.DBBytes+x.WALBytes)/(1<<20), x.Subscribers,
			s.ops.get("result approved")+s.ops.get("result rejected")+s.ops.get("task cancelled (accepted)")+s.ops.get("task cancelled (open)"))
	})

	var lanesWG sync.WaitGroup
	every := time.Duration(float64(p.lanes) / p.rate * float64(time.Second))
	for i, l := range lanes {
		lanesWG.Go(func() { s.handoffLane(ctx, i, l, every) })
	}
	expireDone := make(chan error, 1)
	go s.expireLane(ctx, expOwner, absent.ParticipantID, expireDone)
	lanesWG.Go(func() { s.driverLane(ctx, hotOwners, hotWorker, hw.ParticipantID) })
	lanesWG.Go(func() { s.listenerLane(ctx, listeners, perSession) })
	lanesWG.Go(func() { s.leaverLane(ctx) })
	lanesWG.Go(func() { s.proposalLane(ctx, proposer, reviewer) })
	lanesWG.Go(func() { s.editLane(ctx) })

	select {
	case <-time.After(p.duration):
	case <-ctx.Done():
	}
	// The last sample is taken under load: the lanes stop after it.
	close(samplerStop)
	<-samplerDone
	close(s.stop)
	res.Seconds = time.Since(s.start).Seconds()
	progressDone()
	lanesWG.Wait()
	s.streams.Wait()
	<-expireDone
	res.CPU = cpu.stop()
	maxAct, capSamples, _, merrs, merr := capWatch.finish()
	if merrs > 0 {
		e.faults.add("metrics", fmt.Sprintf("%d failed /debug/metrics polls, last: %v", merrs, merr))
	}
	res.MaxActiveTasks, res.CapSamples = maxAct, capSamples
	if maxAct > maxActiveTasks {
		e.rep.violation(fmt.Sprintf("soak: the room reported %d active tasks, above the cap of %d", maxAct, maxActiveTasks))
	}

	// Every client stream is closed and every keep-alive connection too:
	// the room must let go of all of them.
	release := time.Now().Add(3*p.maxLag + 15*time.Second)
	for ctx.Err() == nil {
		x, err := s.sample(ctx)
		if err != nil {
			return err
		}
		if res.StreamsNotEnd = x.Subscribers; x.Subscribers == 0 || time.Now().After(release) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res.StreamsNotEnd > 0 {
		e.rep.violation(fmt.Sprintf("soak: the room still held %d listen streams %s after every client had closed its own",
			res.StreamsNotEnd, 3*p.maxLag+15*time.Second))
	}
	var gAfter map[string]int
	if res.IdleAfter, gAfter, err = s.idle(ctx); err != nil {
		return err
	}
	res.GoroutinesLeft = goroutineDelta(gBefore, gAfter)
	smu.Lock()
	res.Samples = samples
	smu.Unlock()
	res.Trends = soakTrends(res.Samples, p.warmup.Seconds())
	var dbTrend, hoTrend soakTrend
	for _, tr := range res.Trends {
		switch tr.Name {
		case "of which the db file":
			dbTrend = tr
		case "handoffs (kept for good)":
			hoTrend = tr
		}
	}
	if n := hoTrend.End - hoTrend.AtWarmup; n > 0 {
		res.DBKiBPerHandoff = (dbTrend.End - dbTrend.AtWarmup) * 1024 / n
	}
	res.Ops = s.ops.snapshot()
	for _, op := range soakMustHappen {
		if res.Ops[op] == 0 && ctx.Err() == nil {
			e.rep.violation(fmt.Sprintf("soak: %q never happened, so the soak did not exercise it", op))
		}
	}
	if d := res.IdleAfter.Goroutines - res.IdleBefore.Goroutines; d > 20 {
		e.rep.finding(fmt.Sprintf("soak: the idle room has %d more goroutines after the load than before it (%d → %d)",
			d, res.IdleBefore.Goroutines, res.IdleAfter.Goroutines))
	}
	if d := res.IdleAfter.FDs - res.IdleBefore.FDs; d > 10 {
		e.rep.finding(fmt.Sprintf("soak: the idle room has %d more open descriptors after the load than before it (%d → %d)",
			d, res.IdleBefore.FDs, res.IdleAfter.FDs))
	}

	// Stop the room, then read what it left: row counts, and every outside
	// edit in a version or in the file.
	// The figures are kept and printed even if that reading fails.
	e.release(c)
	e.rep.Soak = res
	ierr := s.inspectSidecar(ctx, res)
	e.rep.printSoak(res)
	if ierr != nil {
		return fmt.Errorf("reading the stopped room's sidecar: %w", ierr)
	}
	return ctx.Err()
}

// inspectSidecar reads the stopped room's sidecar read-only: rows per
// table (what the sidecar's growth is made of) and whether every outside
// edit reached a stored version or the final file.
func (s *soakRun) inspectSidecar(ctx context.Context, res *soakResult) error {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: s.c.file + ".commonroom.db"}).String()+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	res.Rows = map[string]int64{}
	for _, t := range []string{"participants", "sessions", "invites", "versions", "leases", "proposals", "handoffs", "tasks", "task_inputs", "events"} {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+t).Scan(&n); err != nil {
			return fmt.Errorf("counting %s: %w", t, err)
		}
		res.Rows[t] = n
	}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(sum(size), 0) FROM versions").Scan(&res.VersionBytes); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(sum(length(data)), 0) FROM version_chunks").Scan(&res.VersionStored); err != nil {
		return err
	}
	final, err := os.ReadFile(s.c.file)
	if err != nil {
		return err
	}
	s.mu.Lock()
	markers := append([]string(nil), s.markers...)
	s.mu.Unlock()
	res.OutsideEdits = len(markers)
	missing := map[string]bool{}
	for _, m := range markers {
		if !strings.Contains(string(final), m) {
			missing[m] = true
		}
	}
	// The texts are stored as chunks: each version is rebuilt once and
	// every marker still missing is looked for in it.
	for v := int64(1); v <= res.Rows["versions"] && len(missing) > 0; v++ {
		text, err := room.VersionText(ctx, db, v)
		if err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
		for m := range missing {
			if strings.Contains(text, m) {
				delete(missing, m)
			}
		}
	}
	for _, m := range markers {
		if missing[m] {
			res.LostEdits = append(res.LostEdits, m)
		}
	}
	if len(res.LostEdits) > 0 {
		s.e.rep.violation(fmt.Sprintf("soak: %d of %d outside edits are in neither a stored version nor the final file (first: %s)",
			len(res.LostEdits), len(markers), res.LostEdits[0]))
	}
	return nil
}

func (r *report) printSoak(s *soakResult) {
	r.header(fmt.Sprintf("soak (%.0fs, warm-up %s, a sample every %s; --task-ttl %s, --listen-max-lag %s)",
		s.Seconds, s.Warmup, s.SampleEvery, s.TaskTTL, s.ListenMaxLag))
	r.row("soak", "quantity sampled (unit)", "start → end", fmt.Sprintf("slope: least squares over the %d samples after the warm-up", soakSamplesAfter(s)))
	for _, tr := range s.Trends {
		v, vs := tr.line()
		name := tr.Name
		if tr.Part {
			name = "  " + name
		}
		if tr.Unit != "" {
			name += " (" + tr.Unit + ")"
		}
		r.row("soak", name, v, vs)
	}
	r.row("soak", "idle before / after the load: goroutines", fmt.Sprintf("%d / %d", s.IdleBefore.Goroutines, s.IdleAfter.Goroutines), "")
	if len(s.GoroutinesLeft) > 0 {
		var parts []string
		for fn, d := range s.GoroutinesLeft {
			parts = append(parts, fmt.Sprintf("%+d %s", d, fn))
		}
		sort.Strings(parts)
		r.row("soak", "  difference by entry function", "", strings.Join(parts, ", "))
	}
	r.row("soak", "idle before / after the load: open fds", fmt.Sprintf("%d / %d", s.IdleBefore.FDs, s.IdleAfter.FDs), "")
	if d := goroutineDelta(s.IdleBefore.FDKinds, s.IdleAfter.FDKinds); len(d) > 0 {
		var parts []string
		for k, n := range d {
			parts = append(parts, fmt.Sprintf("%+d %s", n, k))
		}
		sort.Strings(parts)
		r.row("soak", "  difference by kind", "", strings.Join(parts, ", "))
	}
	r.row("soak", "idle before / after the load: RSS (MiB)", fmt.Sprintf("%.1f / %.1f", float64(s.IdleBefore.RSSKB)/1024, float64(s.IdleAfter.RSSKB)/1024),
		fmt.Sprintf("Go heap %.1f / %.1f MiB", float64(s.IdleBefore.HeapBytes)/(1<<20), float64(s.IdleAfter.HeapBytes)/(1<<20)))
	r.row("soak", "streams the room held after clients closed", fmt.Sprint(s.StreamsNotEnd), "must be 0")
	r.row("soak", "max active tasks seen by the room (cap 32)", fmt.Sprint(s.MaxActiveTasks), fmt.Sprintf("%d samples", s.CapSamples))
	r.row("soak", "outside edits lost", fmt.Sprintf("%d of %d", len(s.LostEdits), s.OutsideEdits), "must be 0")
	r.row("soak", "CPU ce / bench / others (% of one core)", fmt.Sprintf("%.0f / %.0f / %.0f", s.CPU.CePct, s.CPU.BenchPct, s.CPU.OthersPct), "")
	names := make([]string, 0, len(s.Ops))
	for k := range s.Ops {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		r.row("soak", "  "+k, fmt.Sprint(s.Ops[k]), "")
	}
	var rows []string
	for _, t := range []string{"handoffs", "tasks", "task_inputs", "versions", "proposals", "events", "sessions", "participants", "invites", "leases"} {
		rows = append(rows, fmt.Sprintf("%s %d", t, s.Rows[t]))
	}
	r.row("soak", "sidecar rows at the end", "", strings.Join(rows, ", "))
	r.row("soak", "db file growth per handoff after the warm-up (KiB)", fmt.Sprintf("%.2f", s.DBKiBPerHandoff), "handoffs and versions are kept for good")
	r.row("soak", "document text held by versions (KiB)", fmt.Sprintf("%.0f", float64(s.VersionBytes)/1024), "every version is kept")
	r.row("soak", "  stored as chunks (KiB)", fmt.Sprintf("%.0f", float64(s.VersionStored)/1024), "each distinct chunk once, compressed")
}

func soakSamplesAfter(s *soakResult) int {
	if len(s.Trends) == 0 {
		return 0
	}
	return s.Trends[0].Samples
}
