package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

// The bare SSE fan-out is the fair baseline for the room's fan-out figures.
//
// The in-memory channel loop (baselineFanLoop) delivers a pointer to a
// goroutine: no syscall, no socket, no reader on the other side. Any design
// that gives every subscriber its own socket pays at least one write(2) per
// stream per burst plus the loopback TCP path and the client's read, which
// is 100–1000× the cost of a channel send, so a ratio against the loop only
// says "sockets are not channels". The bare server below is the cheapest
// honest version of what the room does: net/http with one handler goroutine
// per stream, a 256-frame channel per stream (dropping frames when full), a
// single broadcaster, pre-encoded frames of the same size and shape as the
// room's notifications/tasks, and one write and one flush per burst. It has
// none of the room: no SQLite, no JSON encoding per change, no hub
// bookkeeping, no write deadlines, no lag checks. It runs in its own process
// (the bench binary re-executed with bareSSEFlag), so its CPU is measured
// apart from the bench's, as the room's is, and the bench drives it and
// reads it with exactly the code it uses for the room (fanRoom.measure and
// listenStream). What the room costs beyond it is the room's own overhead.

// bareSSEFlag, as the first argument, turns the bench binary into the bare
// SSE server. It is not in the flag set because nobody should type it.
const bareSSEFlag = "--bare-sse-server"

// bareQueueLen is the room's default per-subscriber queue (listen.Config).
const bareQueueLen = 256

// bareTask is one task the bare server's frames describe.
type bareTask struct{ taskID, handoffID string }

// bareTemplate is one notifications/tasks frame encoded once, split where
// each stream splices its subscription id into _meta (as the room does),
// with the offset of the lastUpdatedAt value in rest so a publish only
// copies the frame and writes the time.
type bareTemplate struct {
	head    []byte // data: {…"params":{"_meta":{
	rest    []byte // "commonroom/handoff_id":…}}\n\n
	timeOff int    // offset of the 24-byte wire time in rest
}

// bareFrame is one published change, shared by every stream it goes to.
type bareFrame struct{ head, rest []byte }

func (f *bareFrame) appendTo(dst, meta []byte) []byte {
	dst = append(dst, f.head...)
	dst = append(dst, meta...)
	return append(dst, f.rest...)
}

// newBareTemplate encodes the frame the room sends for this task: _meta
// first, then the task's members in sorted order; with inputRequired it
// carries the same elicitation request as the room's fan-out drivers make.
func newBareTemplate(t bareTask, inputRequired bool) bareTemplate {
	const created = "2026-01-01T00:00:00.000Z"
	placeholder := strings.Repeat("0", len(created))
	head := `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"_meta":{`
	var b strings.Builder
	fmt.Fprintf(&b, `"commonroom/handoff_id":%q},"createdAt":%q,`, t.handoffID, created)
	status := "working"
	if inputRequired {
		status = "input_required"
		b.WriteString(`"inputRequests":{"q1":{"method":"elicitation/create","params":{"mode":"form","message":"carry on?",` +
			`"requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}}},`)
	}
	b.WriteString(`"lastUpdatedAt":"`)
	off := b.Len()
	b.WriteString(placeholder)
	fmt.Fprintf(&b, `","pollIntervalMs":5000,"status":%q,"taskId":%q,"ttlMs":86400000}}`+"\n\n", status, t.taskID)
	return bareTemplate{head: []byte(head), rest: []byte(b.String()), timeOff: off}
}

// stamp makes the frame of one change published at now.
func (t *bareTemplate) stamp(now time.Time) *bareFrame {
	rest := append([]byte(nil), t.rest...)
	var ts [32]byte
	w := now.UTC().AppendFormat(ts[:0], wireTimeLayout)
	copy(rest[t.timeOff:t.timeOff+len(w)], w)
	return &bareFrame{head: t.head, rest: rest}
}

// bareStats is GET /stats of the bare server.
type bareStats struct {
	Subscribers int   `json:"subscribers"`
	Pending     int   `json:"pending"`
	Published   int64 `json:"published"`
	Delivered   int64 `json:"delivered"`
	Dropped     int64 `json:"dropped"`
}

// bareSSE is the bare server: streams on POST /mcp, one change per
// POST /publish, counters on GET /stats.
type bareSSE struct {
	templates [][2]bareTemplate // per task: working, input_required
	pub       chan *bareFrame   // to the broadcaster, so a publish never waits for the fan-out
	mu        sync.Mutex
	subs      map[*bareStream]struct{}

	published, delivered, dropped atomic.Int64
}

type bareStream struct{ q chan *bareFrame }

func newBareSSE(tasks []bareTask) *bareSSE {
	b := &bareSSE{pub: make(chan *bareFrame, 4096), subs: map[*bareStream]struct{}{}}
	for _, t := range tasks {
		b.templates = append(b.templates, [2]bareTemplate{newBareTemplate(t, false), newBareTemplate(t, true)})
	}
	go b.broadcast()
	return b
}

// broadcast offers every published frame to every stream without waiting:
// a full queue loses the frame, and the loss is counted.
func (b *bareSSE) broadcast() {
	for f := range b.pub {
		var n, d int64
		b.mu.Lock()
		for s := range b.subs {
			select {
			case s.q <- f:
				n++
			default:
				d++
			}
		}
		b.mu.Unlock()
		b.delivered.Add(n)
		b.dropped.Add(d)
	}
}

func (b *bareSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/mcp":
		b.listen(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/publish":
		i, err := strconv.Atoi(r.URL.Query().Get("task"))
		if err != nil || i < 0 || i >= len(b.templates) {
			http.Error(w, "bad task", http.StatusBadRequest)
			return
		}
		kind := 0
		if r.URL.Query().Get("input") == "1" {
			kind = 1
		}
		b.pub <- b.templates[i][kind].stamp(time.Now())
		b.published.Add(1)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		b.mu.Lock()
		n := len(b.subs)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(bareStats{Subscribers: n, Pending: len(b.pub), Published: b.published.Load(),
			Delivered: b.delivered.Load(), Dropped: b.dropped.Load()})
	default:
		http.NotFound(w, r)
	}
}

// listen answers subscriptions/listen the way the room does on the wire
// (an acknowledgement listing the tasks, then one frame per change), so the
// bench's listenStream reads it unchanged. Each burst is every frame
// already queued, written at once and flushed once.
func (b *bareSSE) listen(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.ID) == 0 {
		http.Error(w, "bad listen request", http.StatusBadRequest)
		return
	}
	meta := []byte(`"io.modelcontextprotocol/subscriptionId":` + string(req.ID) + `,`)
	ids, _ := json.Marshal(req.Params.Notifications.TaskIDs)
	ack := fmt.Sprintf(`data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{%s},"notifications":{"taskIds":%s}}}`+"\n\n",
		meta[:len(meta)-1], ids)

	s := &bareStream{q: make(chan *bareFrame, bareQueueLen)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	}()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := io.WriteString(w, ack); err != nil || rc.Flush() != nil {
		return
	}
	var buf []byte
	gone := r.Context().Done()
	for {
		select {
		case f := <-s.q:
			buf = f.appendTo(buf[:0], meta)
		drain:
			for range cap(s.q) {
				select {
				case f := <-s.q:
					buf = f.appendTo(buf, meta)
				default:
					break drain
				}
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		case <-gone:
			return
		}
	}
}

// bareSSEMain is the bare server process: it listens on 127.0.0.1:0,
// prints its address on stdout and serves until stdin closes (the bench
// holds the other end, so the server never outlives it). args are
// task_id=handoff_id pairs.
func bareSSEMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var tasks []bareTask
	for _, a := range args {
		t, h, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(stderr, "bare SSE server: bad task %q (want task_id=handoff_id)\n", a)
			return exitUsage
		}
		tasks = append(tasks, bareTask{taskID: t, handoffID: h})
	}
	if len(tasks) == 0 {
		fmt.Fprintln(stderr, "bare SSE server: no tasks")
		return exitUsage
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "bare SSE server:", err)
		return exitFailed
	}
	srv := &http.Server{Handler: newBareSSE(tasks), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintln(stdout, ln.Addr().String())
	io.Copy(io.Discard, stdin)
	return exitOK
}

// bareSSEProc is the bare server child, seen from the bench.
type bareSSEProc struct {
	proc    *cetest.Proc
	addr    string
	hc      *http.Client
	logPath string
}

// startBareSSE re-executes the bench binary as the bare server, in its own
// process like the room, and waits for its address.
func startBareSSE(ctx context.Context, e *env, name string, tasks []bareTask) (*bareSSEProc, error) {
	args := []string{bareSSEFlag}
	for _, t := range tasks {
		args = append(args, t.taskID+"="+t.handoffID)
	}
	proc, addr, logPath, err := startSelfChild(ctx, e, name, "the bare SSE server", args)
	if err != nil {
		return nil, err
	}
	return &bareSSEProc{proc: proc, addr: addr, hc: newLoadClient(2 * fanoutTasks), logPath: logPath}, nil
}

// startSelfChild re-executes the bench binary with args (a server flag
// first), in its own process so its CPU and memory are measured apart from
// the bench's, and waits for the address it prints. The child ends when
// its stdin closes, and dies with the bench.
func startSelfChild(ctx context.Context, e *env, name, what string, args []string) (*cetest.Proc, string, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", "", err
	}
	logPath := filepath.Join(e.workDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, "", "", err
	}
	defer logf.Close()
	proc, err := cetest.StartWith(exe, cetest.Options{Stderr: logf, InheritEnv: true, DieWithParent: true, Stdin: true}, args...)
	if err != nil {
		return nil, "", "", err
	}
	var addr string
	err = awaitReady(ctx, proc, what, logPath, func(line string) error {
		addr = strings.TrimSpace(line)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%q is not an address", addr)
		}
		return nil
	})
	if err != nil {
		stopSelfChild(proc)
		return nil, "", "", err
	}
	return proc, addr, logPath, nil
}

// stopSelfChild closes a self child's stdin, which ends it, and kills it
// if it has not exited within 5s.
func stopSelfChild(proc *cetest.Proc) {
	proc.Stdin.Close()
	select {
	case <-proc.Done():
	case <-time.After(5 * time.Second):
		proc.Cmd.Process.Kill()
		<-proc.Done()
	}
}

// stop closes the server's stdin, which ends it, and kills it if it has not
// exited within 5s.
func (p *bareSSEProc) stop() {
	if p.proc == nil {
		return
	}
	proc := p.proc
	p.proc = nil
	p.hc.CloseIdleConnections()
	stopSelfChild(proc)
}

func (p *bareSSEProc) stats(ctx context.Context) (bareStats, error) {
	var st bareStats
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("bare SSE /stats: HTTP %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// bareDriver publishes one task's changes, alternating input_required and
// working as the room's fan-out drivers do. One change is one request, as
// a change to the room is one request to /mcp.
type bareDriver struct {
	p     *bareSSEProc
	task  int
	input bool
}

func (d *bareDriver) step(ctx context.Context) error {
	d.input = !d.input
	q := "0"
	if d.input {
		q = "1"
	}
	u := fmt.Sprintf("http://%s/publish?task=%d&input=%s", d.p.addr, d.task, q)
	status, body, err := postJSON(ctx, d.p.hc, u, nil, nil)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("bare SSE publish: HTTP %d: %s", status, clip(body))
	}
	return nil
}

// bareSSEBaseline is the bare server at one stream count, driven exactly as
// the fan-out scenario drives the room at that count.
type bareSSEBaseline struct {
	Streams        int            `json:"streams"`
	Receiver       string         `json:"receiver"` // how the bench read the streams (--receiver)
	OpenSeconds    float64        `json:"open_seconds"`
	RSSPerStreamKB float64        `json:"rss_per_stream_kb"`
	Steady         fanPhaseResult `json:"steady"`
	Max            fanPhaseResult `json:"max"`
	StreamsEnded   int            `json:"streams_ended"` // the bare server never ends a stream; more than 0 is a fault
}

// randomID is a room-shaped id: prefix, underscore, 32 hex digits.
func randomID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// baselineBareSSE runs the bare SSE fan-out with n streams: the same open,
// the same steady and max phases (same rate, window, duration and
// drivers), the same readers as fanoutSize uses against the room.
func baselineBareSSE(ctx context.Context, e *env, n int) (*bareSSEBaseline, error) {
	tasks := make([]bareTask, fanoutTasks)
	ids := make([]string, fanoutTasks)
	for i := range tasks {
		tasks[i] = bareTask{taskID: randomID("task"), handoffID: randomID("handoff")}
		ids[i] = tasks[i].taskID
	}
	p, err := startBareSSE(ctx, e, fmt.Sprintf("bare-sse-%d", n), tasks)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	proc := &ceServer{pid: p.proc.Pid(), ingressURL: "http://" + p.addr}
	f := &fanRoom{e: e, c: proc, listeners: []session{{Token: "bare"}}, perSess: n, taskIDs: ids}
	for i := range tasks {
		f.drivers = append(f.drivers, &bareDriver{p: p, task: i})
	}
	f.pending = func(ctx context.Context) (int, error) {
		st, err := p.stats(ctx)
		return st.Pending, err
	}
	f.discarded = func(ctx context.Context) (int64, error) {
		st, err := p.stats(ctx)
		return st.Dropped, err
	}
	defer f.closeAll()
	r := &bareSSEBaseline{Streams: n, Receiver: e.cfg.receiver}
	rss0, err := proc.rssKB()
	if err != nil {
		return nil, err
	}
	e.waitQuiet(ctx, fmt.Sprintf("bare SSE %d", n))
	e.logf("baseline: bare SSE fan-out, opening %d streams", n)
	t0 := time.Now()
	if err := f.open(ctx, n); err != nil {
		return nil, fmt.Errorf("bare SSE: opening streams (%d of %d open): %w", len(f.streams), n, err)
	}
	r.OpenSeconds = time.Since(t0).Seconds()
	time.Sleep(200 * time.Millisecond)
	if rss1, err := proc.rssKB(); err == nil {
		r.RSSPerStreamKB = float64(rss1-rss0) / float64(n)
	}
	e.logf("baseline: bare SSE fan-out, %d streams: %s at %.0f changes/s, then %s with a %d-change window",
		n, e.cfg.fanoutDuration, e.cfg.fanoutRate, e.cfg.fanoutDuration, fanoutWindow)
	r.Steady = f.measure(ctx, fmt.Sprintf("steady %.0f changes/s", e.cfg.fanoutRate), e.cfg.fanoutDuration, e.cfg.fanoutRate)
	r.Max = f.measure(ctx, fmt.Sprintf("max (window %d)", fanoutWindow), e.cfg.fanoutDuration, 0)
	for _, s := range f.streams {
		if s.state.Load() != streamOpen {
			r.StreamsEnded++
		}
		if o := s.other.Load(); o > 0 {
			e.faults.add("bare SSE", fmt.Sprintf("%d frames of an unexpected kind", o))
		}
	}
	if r.StreamsEnded > 0 {
		e.faults.add("bare SSE", fmt.Sprintf("%d of %d streams ended; the bare server never ends one (log: %s)", r.StreamsEnded, n, tail(p.logPath)))
	}
	return r, ctx.Err()
}
