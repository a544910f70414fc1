package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// pollWorking is how many of the polled tasks stay working; the rest are
// completed (tasks/get then carries the result). It stays well under the
// 32-task cap so a target room with a little traffic of its own still fits.
const pollWorking = 16

// pollResult is one polling phase.
type pollResult struct {
	Clients      int     `json:"clients"`
	Seconds      float64 `json:"seconds"`
	Requests     int64   `json:"requests"`
	RequestsPerS float64 `json:"requests_per_sec"`
	Latency      latency `json:"latency"`
	PollInterval int     `json:"poll_interval_ms,omitempty"`
	CPU          cpuUse  `json:"cpu"`
	// CPUPerRequestUs is the server process's CPU per request (µs), from
	// /proc/<pid>/stat read right before and after the window.
	CPUPerRequestUs float64 `json:"server_cpu_per_request_us"`
	ExpectedPerS    float64 `json:"expected_per_sec,omitempty"` // clients / interval, for the honouring phase
	WorkingTasks    int     `json:"working_tasks"`
	FinishedTasks   int     `json:"completed_tasks"`
}

type pollResults struct {
	Honouring  *pollResult `json:"tasks_get_honouring_interval"`
	Tight      *pollResult `json:"tasks_get_tight"`
	HandoffGet *pollResult `json:"handoff_get_tight"`
}

// scenarioPoll measures tasks/get as clients use it: first honouring the
// pollIntervalMs the room hands out (the realistic load), then in a tight
// loop (capacity), then tools/call handoff_get in a tight loop.
func scenarioPoll(ctx context.Context, e *env) error {
	c, err := e.room(ctx, "poll", false)
	if err != nil {
		return err
	}
	defer e.release(c)
	n := e.cfg.pollClients
	rc := newRoomClient(c, n+4)
	defer rc.close()
	owners, err := rc.sessions(ctx, "poller", n, "read", "propose")
	if err != nil {
		return err
	}
	ws, err := rc.sessions(ctx, "poll-worker", 1, "read", "checkout")
	if err != nil {
		return err
	}
	worker := rc.mcp(ws[0])
	clients := make([]*mcpClient, n)
	tasks := make([]handoff, n)
	working := 0
	for i := range n {
		clients[i] = rc.mcp(owners[i])
		h, err := clients[i].createHandoff(ctx, fmt.Sprintf("poll target %d", i), ws[0].ParticipantID)
		if err != nil {
			return fmt.Errorf("poll setup: create: %w", err)
		}
		if err := worker.handoffAction(ctx, "handoff_accept", h.ID, nil); err != nil {
			return fmt.Errorf("poll setup: accept: %w", err)
		}
		if working < pollWorking {
			working++
		} else if err := worker.handoffAction(ctx, "handoff_complete", h.ID, completeArgs); err != nil {
			return fmt.Errorf("poll setup: complete: %w", err)
		}
		tasks[i] = h
	}
	defer func() {
		// Leave no active task behind (it matters on a --target-file room).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := range min(working, n) {
			if err := worker.handoffAction(cctx, "handoff_complete", tasks[i].ID, completeArgs); err != nil {
				e.fault(cctx, "poll cleanup", err)
			}
		}
	}()

	res := &pollResults{}
	getTask := func(i int) (int, error) {
		t, err := clients[i].taskGet(ctx, tasks[i].TaskID)
		return t.PollIntervalMs, err
	}
	e.waitQuiet(ctx, "poll")
	e.logf("poll: %d clients honouring pollIntervalMs for %s", n, e.cfg.duration)
	res.Honouring = pollPhase(ctx, e, c, n, e.cfg.duration, true, getTask)
	e.waitQuiet(ctx, "poll tight")
	e.logf("poll: %d clients polling tasks/get in a tight loop for %s", n, e.cfg.duration)
	res.Tight = pollPhase(ctx, e, c, n, e.cfg.duration, false, getTask)
	e.waitQuiet(ctx, "poll handoff_get")
	e.logf("poll: %d clients calling handoff_get in a tight loop for %s", n, e.cfg.duration)
	res.HandoffGet = pollPhase(ctx, e, c, n, e.cfg.duration, false, func(i int) (int, error) {
		return 0, clients[i].handoffAction(ctx, "handoff_get", tasks[i].ID, nil)
	})
	for _, r := range []*pollResult{res.Honouring, res.Tight, res.HandoffGet} {
		r.WorkingTasks, r.FinishedTasks = working, n-working
	}
	e.rep.Poll = res
	e.rep.printPoll()
	return ctx.Err()
}

// pollPhase runs n clients for d. With honour, each sleeps the interval the
// room returned between polls (starting at a random offset, as independent
// clients would); otherwise they poll back to back.
func pollPhase(ctx context.Context, e *env, c *ceServer, n int, d time.Duration, honour bool,
	call func(i int) (int, error)) *pollResult {
	hists := make([]hist, n)
	var total atomic.Int64
	var interval atomic.Int64
	cpu := startCPU(c)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if honour {
				// Independent clients do not poll in lock step.
				if !sleepUntil(ctx, start.Add(time.Duration(rand.Int64N(int64(5*time.Second)))), deadline) {
					return
				}
			}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				iv, err := call(i)
				if err != nil {
					e.fault(ctx, "poll", err)
					return
				}
				hists[i].add(time.Since(t0))
				total.Add(1)
				if honour {
					if iv <= 0 {
						e.fault(ctx, "poll", fmt.Errorf("tasks/get carried no pollIntervalMs"))
						return
					}
					interval.Store(int64(iv))
					if !sleepUntil(ctx, time.Now().Add(time.Duration(iv)*time.Millisecond), deadline) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all hist
	for i := range hists {
		all.merge(&hists[i])
	}
	r := &pollResult{Clients: n, Seconds: elapsed.Seconds(), Requests: total.Load(), Latency: all.summary(), CPU: cpu.stop()}
	r.RequestsPerS = float64(r.Requests) / r.Seconds
	r.CPUPerRequestUs = r.CPU.perRequestUs(r.Requests)
	if iv := interval.Load(); honour && iv > 0 {
		r.PollInterval = int(iv)
		r.ExpectedPerS = float64(n) / (float64(iv) / 1000)
	}
	return r
}

// sleepUntil sleeps until t, and reports false instead if the deadline or
// ctx comes first.
func sleepUntil(ctx context.Context, t, deadline time.Time) bool {
	if !t.Before(deadline) {
		wait := time.Until(deadline)
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		return false
	}
	select {
	case <-time.After(time.Until(t)):
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
