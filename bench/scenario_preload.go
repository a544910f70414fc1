package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// preloadSmall is the sidecar size the large one is compared with.
const preloadSmall = 1000

// preloadWorkers create and cancel handoffs concurrently. Each holds at most
// one active task, and with the probe's creators they stay under the
// 32-task cap, so no create is refused.
const (
	preloadWorkers = 24
	probePollers   = 8
	probeCreators  = 4
)

type preloadProbe struct {
	Handoffs       int     `json:"handoffs_in_sidecar"`
	SidecarMB      float64 `json:"sidecar_mb"`
	TasksGet       latency `json:"tasks_get"`
	TasksGetPerSec float64 `json:"tasks_get_per_sec"`
	Create         latency `json:"handoff_create"`
	CreatePerSec   float64 `json:"handoff_create_per_sec"`
	CPU            cpuUse  `json:"cpu"`
	// CPUPerRequestUs is ce's CPU per request of the probe (µs): every
	// tasks/get, handoff_create and the tasks/cancel after each create.
	CPUPerRequestUs float64 `json:"server_cpu_per_request_us"`
}

type preloadResult struct {
	Target int `json:"target"`
	// Mode is how the sidecar was filled beyond the small probe: "mcp"
	// (Seconds and HandoffsPerSec are of /mcp creates and cancels) or "bulk"
	// (of the direct inserts alone; the stop, checks and restart are
	// printed beside them).
	Mode           string        `json:"preload_mode"`
	Seconds        float64       `json:"preload_seconds"`
	HandoffsPerSec float64       `json:"preload_handoffs_per_sec"`
	Small          *preloadProbe `json:"small"`
	Large          *preloadProbe `json:"large"`
	GetP99Ratio    float64       `json:"tasks_get_p99_ratio"`
	CreateP99Ratio float64       `json:"handoff_create_p99_ratio"`

	// The bulk fill's other steps, for the table only: the JSON keeps the
	// fields it always had.
	bulkStop, bulkChecks, bulkRestart time.Duration
}

// preloader fills a room with handoffs through /mcp (create, then cancel
// the task so the cap never bites) and remembers every task id so the
// probe can read tasks spread over the whole table.
type preloader struct {
	rc      *roomClient
	workers []*mcpClient
	mu      sync.Mutex
	taskIDs []string
	// created counts every handoff this room has, the probes' included:
	// the room is the preload's own, and /debug/metrics only reports its
	// handoff total as of up to 5 s ago.
	created atomic.Int64
}

func (p *preloader) fill(ctx context.Context, e *env, upTo int) error {
	p.mu.Lock()
	have := len(p.taskIDs)
	p.mu.Unlock()
	if have >= upTo {
		return nil
	}
	var next atomic.Int64
	next.Store(int64(have))
	start := time.Now()
	done := e.progressTicker(ctx, "preload", func() string {
		n := next.Load()
		rate := float64(n-int64(have)) / time.Since(start).Seconds()
		eta := time.Duration(float64(int64(upTo)-n)/max(rate, 1)) * time.Second
		return fmt.Sprintf("%d/%d handoffs, %.0f/s, about %s to go", n, upTo, rate, eta.Round(time.Second))
	})
	defer done()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w, c := range p.workers {
		wg.Go(func() {
			for ctx.Err() == nil && !failed.Load() {
				k := next.Add(1)
				if k > int64(upTo) {
					return
				}
				h, err := c.createHandoff(ctx, fmt.Sprintf("preloaded %d by %d", k, w), "")
				if err == nil {
					p.created.Add(1)
					err = c.taskCancel(ctx, h.TaskID)
				}
				if err != nil {
					e.fault(ctx, "preload", err)
					failed.Store(true)
					return
				}
				p.mu.Lock()
				p.taskIDs = append(p.taskIDs, h.TaskID)
				p.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return fmt.Errorf("preload stopped on an error")
	}
	return ctx.Err()
}

// probe measures tasks/get on random tasks of the whole table (admin
// sessions, which may read any task) and handoff_create latency, together,
// with the same load at every sidecar size.
func (p *preloader) probe(ctx context.Context, e *env, c *ceServer, pollers, creators []*mcpClient) (*preloadProbe, error) {
	e.waitQuiet(ctx, "preload probe")
	p.mu.Lock()
	ids := p.taskIDs
	p.mu.Unlock()
	d := e.cfg.probeDuration
	getH := make([]hist, len(pollers))
	createH := make([]hist, len(creators))
	var gets, creates atomic.Int64
	cpu := startCPU(c)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i, mc := range pollers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				id := ids[rng.IntN(len(ids))]
				t0 := time.Now()
				if _, err := mc.taskGet(ctx, id); err != nil {
					e.fault(ctx, "preload probe tasks/get", err)
					return
				}
				getH[i].add(time.Since(t0))
				gets.Add(1)
			}
		})
	}
	for i, mc := range creators {
		wg.Go(func() {
			for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				t0 := time.Now()
				h, err := mc.createHandoff(ctx, fmt.Sprintf("probe %d/%d", i, k), "")
				if err != nil {
					e.fault(ctx, "preload probe create", err)
					return
				}
				createH[i].add(time.Since(t0))
				creates.Add(1)
				p.created.Add(1)
				if err := mc.taskCancel(ctx, h.TaskID); err != nil {
					e.fault(ctx, "preload probe cancel", err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	r := &preloadProbe{CPU: cpu.stop(), TasksGetPerSec: float64(gets.Load()) / el, CreatePerSec: float64(creates.Load()) / el}
	r.CPUPerRequestUs = r.CPU.perRequestUs(gets.Load() + 2*creates.Load())
	var g, cr hist
	for i := range getH {
		g.merge(&getH[i])
	}
	for i := range createH {
		cr.merge(&createH[i])
	}
	r.TasksGet, r.Create = g.summary(), cr.summary()
	r.Handoffs = int(p.created.Load())
	var size int64
	for _, suffix := range []string{".commonroom.db", ".commonroom.db-wal"} {
		if st, err := os.Stat(c.file + suffix); err == nil {
			size += st.Size()
		}
	}
	r.SidecarMB = float64(size) / (1 << 20)
	return r, ctx.Err()
}

// bulk stops the room c gracefully, fills its sidecar to upTo handoffs
// directly (bulkFill) and serves it again, which is also the test that ce
// accepts the file. It returns the new room.
func (p *preloader) bulk(ctx context.Context, e *env, c *ceServer, res *preloadResult, owners []string, upTo int) (*ceServer, error) {
	e.logf("preload: stopping the room to fill its sidecar to %d handoffs directly", upTo)
	t0 := time.Now()
	if err := c.stop(); err != nil {
		return nil, fmt.Errorf("stopping the room before the bulk load: %v (log: %s)", err, tail(c.logPath))
	}
	res.bulkStop = time.Since(t0)
	bt, err := p.bulkFill(ctx, e, c.file, owners, upTo)
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	res.Seconds, res.bulkChecks = bt.load.Seconds(), bt.checks
	e.logf("preload bulk: loaded in %.1fs, checked in %.1fs; serving the room again", bt.load.Seconds(), bt.checks.Seconds())
	t0 = time.Now()
	c2, err := e.serveAgain(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("serving the bulk-loaded sidecar: %w", err)
	}
	res.bulkRestart = time.Since(t0)
	return c2, nil
}

// sameAsCE asks the restarted room for a task ce wrote through /mcp and for
// one the bulk load wrote (the first at index bulkFrom), and fails unless
// tasks/get answers both alike but for ids and times: ce itself must read
// the bulk rows as its own.
func (p *preloader) sameAsCE(ctx context.Context, mc *mcpClient, bulkFrom int) error {
	p.mu.Lock()
	ids := []string{p.taskIDs[0], p.taskIDs[len(p.taskIDs)-1]}
	inBulk := len(p.taskIDs) > bulkFrom
	p.mu.Unlock()
	if !inBulk {
		return nil
	}
	var views [2]string
	for i, id := range ids {
		raw, err := mc.call(ctx, "tasks/get", id, map[string]any{"taskId": id})
		if err != nil {
			return fmt.Errorf("tasks/get %s after the bulk load: %w", id, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil || m["taskId"] != id {
			return fmt.Errorf("tasks/get %s after the bulk load answered %s", id, clip(raw))
		}
		for _, k := range []string{"taskId", "createdAt", "lastUpdatedAt", "_meta"} {
			delete(m, k)
		}
		b, _ := json.Marshal(m) // map keys sorted: comparable as text
		views[i] = string(b)
	}
	if views[0] != views[1] {
		return fmt.Errorf("ce reads a bulk-loaded task differently from one it wrote: %s vs %s", views[1], views[0])
	}
	return nil
}

// scenarioPreload compares tasks/get and handoff_create p99 with 1,000
// handoffs in the sidecar and with --preload of them. It always uses a room
// of its own: a million handoffs do not belong in someone's --target-file.
// The first 1,000 always go through /mcp; the rest too in mcp mode, while
// bulk mode writes them into the stopped room's sidecar and serves it again
// (see preload_bulk.go), the same participants and sessions probing after.
func scenarioPreload(ctx context.Context, e *env) error {
	n := e.cfg.preload
	c, err := e.room(ctx, "preload", true)
	if err != nil {
		return err
	}
	defer e.release(c)
	rc := newRoomClient(c, preloadWorkers+probePollers+probeCreators)
	defer rc.close()
	ws, err := rc.sessions(ctx, "preloader", preloadWorkers, "read", "propose")
	if err != nil {
		return err
	}
	ps, err := rc.sessions(ctx, "prober", probePollers, "read", "admin")
	if err != nil {
		return err
	}
	cs, err := rc.sessions(ctx, "probe-creator", probeCreators, "read", "propose")
	if err != nil {
		return err
	}
	mcs := func(rc *roomClient, ss []session) []*mcpClient {
		out := make([]*mcpClient, len(ss))
		for i, s := range ss {
			out[i] = rc.mcp(s)
		}
		return out
	}
	p := &preloader{rc: rc, workers: mcs(rc, ws)}
	pollers, creators := mcs(rc, ps), mcs(rc, cs)
	res := &preloadResult{Target: n, Mode: e.cfg.preloadMode}
	e.rep.Preload = res

	small := min(preloadSmall, n)
	e.logf("preload: %d handoffs, then a %s probe", small, e.cfg.probeDuration)
	if err := p.fill(ctx, e, small); err != nil {
		return err
	}
	if res.Small, err = p.probe(ctx, e, c, pollers, creators); err != nil {
		return err
	}
	before := len(p.taskIDs)
	if res.Mode == "bulk" {
		// The probe clients are bound to the room's address; the restarted
		// room has new ones but the same sessions, which live in the sidecar.
		owners := make([]string, len(ws))
		for i, s := range ws {
			owners[i] = s.ParticipantID
		}
		if c, err = p.bulk(ctx, e, c, res, owners, n); err != nil {
			return err
		}
		defer e.release(c)
		rc2 := newRoomClient(c, probePollers+probeCreators)
		defer rc2.close()
		pollers, creators = mcs(rc2, ps), mcs(rc2, cs)
		if err := p.sameAsCE(ctx, pollers[0], before); err != nil {
			return err
		}
	} else {
		e.logf("preload: filling to %d handoffs through /mcp", n)
		t0 := time.Now()
		if err := p.fill(ctx, e, n); err != nil {
			return err
		}
		res.Seconds = time.Since(t0).Seconds()
	}
	res.HandoffsPerSec = float64(len(p.taskIDs)-before) / max(res.Seconds, 1e-9)
	e.logf("preload: %d handoffs in %.1fs (%.0f/s, %s); probing", len(p.taskIDs), res.Seconds, res.HandoffsPerSec, res.Mode)
	if res.Large, err = p.probe(ctx, e, c, pollers, creators); err != nil {
		return err
	}
	if res.Small.TasksGet.P99Ms > 0 {
		res.GetP99Ratio = res.Large.TasksGet.P99Ms / res.Small.TasksGet.P99Ms
	}
	if res.Small.Create.P99Ms > 0 {
		res.CreateP99Ratio = res.Large.Create.P99Ms / res.Small.Create.P99Ms
	}
	e.rep.printPreload()
	return nil
}
