package main

import (
	"context"
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
}

type preloadResult struct {
	Target         int           `json:"target"`
	Seconds        float64       `json:"preload_seconds"`
	HandoffsPerSec float64       `json:"preload_handoffs_per_sec"`
	Small          *preloadProbe `json:"small"`
	Large          *preloadProbe `json:"large"`
	GetP99Ratio    float64       `json:"tasks_get_p99_ratio"`
	CreateP99Ratio float64       `json:"handoff_create_p99_ratio"`
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

// scenarioPreload compares tasks/get and handoff_create p99 with 1,000
// handoffs in the sidecar and with --preload of them. It always uses a room
// of its own: a million handoffs do not belong in someone's --target-file.
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
	mcs := func(ss []session) []*mcpClient {
		out := make([]*mcpClient, len(ss))
		for i, s := range ss {
			out[i] = rc.mcp(s)
		}
		return out
	}
	p := &preloader{rc: rc, workers: mcs(ws)}
	pollers, creators := mcs(ps), mcs(cs)
	res := &preloadResult{Target: n}
	e.rep.Preload = res

	small := min(preloadSmall, n)
	e.logf("preload: %d handoffs, then a %s probe", small, e.cfg.probeDuration)
	if err := p.fill(ctx, e, small); err != nil {
		return err
	}
	if res.Small, err = p.probe(ctx, e, c, pollers, creators); err != nil {
		return err
	}
	e.logf("preload: filling to %d handoffs", n)
	t0 := time.Now()
	before := len(p.taskIDs)
	if err := p.fill(ctx, e, n); err != nil {
		return err
	}
	res.Seconds = time.Since(t0).Seconds()
	res.HandoffsPerSec = float64(len(p.taskIDs)-before) / res.Seconds
	e.logf("preload: %d handoffs in %.0fs (%.0f/s); probing", n, res.Seconds, res.HandoffsPerSec)
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
