package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	_ "modernc.org/sqlite"
)

// Baselines answer "compared with what?": the same client against a handler
// that does nothing (the HTTP ceiling of this machine), SQLite committing as
// fast as it can on the same disk (the fsync ceiling), a bare SSE fan-out
// over loopback in a process of its own (the ceiling for a socket per
// subscriber, and the one the room's fan-out is judged against; see
// baseline_sse.go), and a channel fan-out in memory (the in-process ceiling
// for delivering one message to N readers, kept for reference).

type httpBaseline struct {
	Clients      int     `json:"clients"`
	Seconds      float64 `json:"seconds"`
	Requests     int64   `json:"requests"`
	RequestsPerS float64 `json:"requests_per_sec"`
	Latency      latency `json:"latency"`
	CPU          cpuUse  `json:"cpu"`
	// CPUPerRequestUs is the server process's CPU per request (µs).
	CPUPerRequestUs float64 `json:"server_cpu_per_request_us"`
}

type sqliteBaseline struct {
	Mode       string  `json:"mode"`
	Producers  int     `json:"producers"`
	Seconds    float64 `json:"seconds"`
	Rows       int64   `json:"rows"`
	RowsPerSec float64 `json:"rows_per_sec"`
	Commits    int64   `json:"commits"`
	CommitsPS  float64 `json:"commits_per_sec"`
}

type fanLoopBaseline struct {
	Readers          int     `json:"readers"`
	Seconds          float64 `json:"seconds"`
	Delivered        int64   `json:"delivered"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	Dropped          int64   `json:"dropped"`
}

type baselineResults struct {
	HTTP          *httpBaseline      `json:"http_trivial_handler"`
	SQLiteGroup   *sqliteBaseline    `json:"sqlite_group_commit"`
	SQLitePerRow  *sqliteBaseline    `json:"sqlite_commit_per_row"`
	FanLoop       []*fanLoopBaseline `json:"bare_fanout_loop"`
	BareSSE       []*bareSSEBaseline `json:"bare_sse_fanout"`
	SQLiteDataDir string             `json:"sqlite_dir"`
}

func scenarioBaselines(ctx context.Context, e *env) error {
	b := &baselineResults{}
	e.rep.Baselines = b
	var err error
	e.waitQuiet(ctx, "baselines")
	e.logf("baseline: trivial chi handler, %d clients for %s", e.cfg.agents, e.cfg.duration)
	if b.HTTP, err = baselineHTTP(ctx, e, e.cfg.agents, e.cfg.duration); err != nil {
		return err
	}
	e.rep.printBaselineHTTP()
	// Beside the room: the SQLite figures are only a ceiling for the room's
	// if they are taken on the same disk.
	dir := e.workDir
	if e.target != nil {
		dir = filepath.Dir(e.target.file)
	}
	sdir, err := os.MkdirTemp(dir, "ce-bench-sqlite-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sdir)
	b.SQLiteDataDir = sdir
	d := e.cfg.sqliteDuration
	e.logf("baseline: SQLite group commit, %d producers for %s", e.cfg.agents, d)
	if b.SQLiteGroup, err = baselineSQLite(ctx, filepath.Join(sdir, "group.db"), e.cfg.agents, 64, d); err != nil {
		return err
	}
	e.logf("baseline: SQLite one transaction per row for %s", d)
	if b.SQLitePerRow, err = baselineSQLite(ctx, filepath.Join(sdir, "perrow.db"), e.cfg.agents, 1, d); err != nil {
		return err
	}
	e.rep.printBaselineSQLite()
	for _, n := range e.cfg.fanoutSizes {
		b.FanLoop = append(b.FanLoop, baselineFanLoop(ctx, n, e.cfg.fanLoopDuration))
	}
	e.rep.printBaselineFanLoop()
	for _, n := range e.cfg.fanoutSizes {
		r, err := baselineBareSSE(ctx, e, n)
		if err != nil {
			return fmt.Errorf("bare SSE fan-out, %d streams: %w", n, err)
		}
		b.BareSSE = append(b.BareSSE, r)
		e.rep.printBaselineBareSSE(r)
	}
	return ctx.Err()
}

// baselineHTTP serves a trivial JSON-RPC handler on chi in a process of its
// own (the bench binary re-executed with trivialHTTPFlag, as the bare SSE
// server is) and loads it with the MCP client the room scenarios use, with
// the same headers, body shape and concurrency: whatever the room does
// beyond this is its own cost. Its own process, so its CPU per request is
// the handler's (and net/http's) alone, read from /proc like ce's, and the
// load generator's is not mixed into it.
func baselineHTTP(ctx context.Context, e *env, clients int, d time.Duration) (*httpBaseline, error) {
	proc, addr, logPath, err := startSelfChild(ctx, e, "trivial-http", "the trivial HTTP server", []string{trivialHTTPFlag})
	if err != nil {
		return nil, err
	}
	defer stopSelfChild(proc)
	hc := newLoadClient(clients)
	defer hc.CloseIdleConnections()
	u := (&url.URL{Scheme: "http", Host: addr, Path: "/mcp"}).String()
	mc := make([]*mcpClient, clients)
	for i := range mc {
		mc[i] = newMCP(hc, u, "baseline-token")
	}
	res := pollPhase(ctx, e, &ceServer{pid: proc.Pid(), logPath: logPath}, clients, d, false, func(i int) (int, error) {
		_, err := mc[i].taskGet(ctx, "task_baseline")
		return 0, err
	})
	return &httpBaseline{Clients: clients, Seconds: res.Seconds, Requests: res.Requests, RequestsPerS: res.RequestsPerS,
		Latency: res.Latency, CPU: res.CPU, CPUPerRequestUs: res.CPUPerRequestUs}, nil
}

// trivialHTTPFlag, as the first argument, turns the bench binary into the
// trivial HTTP server of the ceiling baseline. Not in the flag set: nobody
// should type it.
const trivialHTTPFlag = "--trivial-http-server"

// trivialHandler answers a JSON-RPC request with a tasks/get-shaped result
// and does nothing else: the least a handler behind chi can do.
func trivialHandler() http.Handler {
	r := chi.NewRouter()
	r.Post("/mcp", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params map[string]any  `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
			"resultType": "complete", "taskId": req.Params["taskId"], "status": "working",
			"lastUpdatedAt": time.Now().UTC().Format(wireTimeLayout), "pollIntervalMs": 5000}})
	})
	return r
}

// trivialHTTPMain is the trivial server process: it listens on
// 127.0.0.1:0, prints its address and serves until stdin closes.
func trivialHTTPMain(stdin io.Reader, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "trivial HTTP server:", err)
		return exitFailed
	}
	srv := &http.Server{Handler: trivialHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintln(stdout, ln.Addr().String())
	io.Copy(io.Discard, stdin)
	return exitOK
}

// baselineSQLite commits one-row inserts from producers through a single
// committer goroutine, batching up to maxBatch rows per transaction — the
// room's own design minus everything but SQLite — with the room's pragmas
// (WAL, synchronous=FULL).
func baselineSQLite(ctx context.Context, path string, producers, maxBatch int, d time.Duration) (*sqliteBaseline, error) {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, payload TEXT NOT NULL, at INTEGER NOT NULL)`); err != nil {
		return nil, err
	}
	var syncMode string
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != "2" {
		return nil, fmt.Errorf("sqlite baseline: synchronous is %q, want 2 (FULL): %v", syncMode, err)
	}
	type req struct {
		producer int
		reply    chan error
	}
	reqs := make(chan req, producers)
	stop := make(chan struct{})
	var rows, commits atomic.Int64
	committerDone := make(chan error, 1)
	go func() {
		committerDone <- func() error {
			batch := make([]req, 0, maxBatch)
			for {
				batch = batch[:0]
				select {
				case r := <-reqs:
					batch = append(batch, r)
				case <-stop:
					return nil
				}
			drain:
				for len(batch) < maxBatch {
					select {
					case r := <-reqs:
						batch = append(batch, r)
					default:
						break drain
					}
				}
				tx, err := db.BeginTx(ctx, nil)
				if err == nil {
					now := time.Now().UnixMilli()
					for _, r := range batch {
						if _, err = tx.Exec(`INSERT INTO rows (producer, payload, at) VALUES (?, ?, ?)`, r.producer, "a bench row of about sixty bytes, like a small event payload", now); err != nil {
							break
						}
					}
					if err == nil {
						err = tx.Commit()
					} else {
						tx.Rollback()
					}
				}
				if err == nil {
					commits.Add(1)
					rows.Add(int64(len(batch)))
				}
				for _, r := range batch {
					r.reply <- err
				}
				if err != nil {
					return err
				}
			}
		}()
	}()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	var perr atomic.Value
	for p := range producers {
		wg.Go(func() {
			reply := make(chan error, 1)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				select {
				case reqs <- req{producer: p, reply: reply}:
				case <-ctx.Done():
					return
				}
				if err := <-reply; err != nil {
					perr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	if err := <-committerDone; err != nil {
		return nil, err
	}
	if err, _ := perr.Load().(error); err != nil {
		return nil, err
	}
	mode := fmt.Sprintf("group commit (≤%d rows per transaction)", maxBatch)
	if maxBatch == 1 {
		mode = "one transaction per row"
	}
	r := &sqliteBaseline{Mode: mode, Producers: producers, Seconds: elapsed.Seconds(), Rows: rows.Load(), Commits: commits.Load()}
	r.RowsPerSec = float64(r.Rows) / r.Seconds
	r.CommitsPS = float64(r.Commits) / r.Seconds
	return r, nil
}

// baselineFanLoop is the in-process floor of fan-out cost: n goroutines each
// draining a buffered channel (the room's per-subscriber queue length), and
// one sender offering every message to every channel without blocking. No
// design with a socket per subscriber can come near it (a channel send is
// not a write(2)), so it is reported for reference only; the room's fan-out
// ratios and target use the bare SSE fan-out instead.
func baselineFanLoop(ctx context.Context, n int, d time.Duration) *fanLoopBaseline {
	type msg struct{ at int64 }
	chans := make([]chan *msg, n)
	counts := make([]int64, n)
	var wg sync.WaitGroup
	for i := range chans {
		chans[i] = make(chan *msg, 256)
		wg.Go(func() {
			var c int64
			for m := range chans[i] {
				if m.at > 0 {
					c++
				}
			}
			counts[i] = c
		})
	}
	var delivered, dropped int64
	start := time.Now()
	deadline := start.Add(d)
	for k := int64(1); ctx.Err() == nil; k++ {
		m := &msg{at: k}
		for _, ch := range chans {
			select {
			case ch <- m:
				delivered++
			default:
				dropped++
			}
		}
		if k%16 == 0 && !time.Now().Before(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	for _, ch := range chans {
		close(ch)
	}
	wg.Wait()
	r := &fanLoopBaseline{Readers: n, Seconds: elapsed.Seconds(), Delivered: delivered, Dropped: dropped}
	r.DeliveriesPerSec = float64(delivered) / r.Seconds
	return r
}
