package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The four steps of one handoff's life, each through POST /mcp.
var lifecycleSteps = []string{"create", "accept", "complete", "approve"}

// maxActiveTasks is the room's cap on working + input_required tasks
// (room.Defaults().MaxActiveTasks). Seeing more than this is a server bug.
const maxActiveTasks = 32

// lifecycleResult is one lifecycle run.
type lifecycleResult struct {
	MaxBatch         string  `json:"max_batch"` // "default" or the flag value
	Agents           int     `json:"agents"`
	Seconds          float64 `json:"seconds"`
	Lifecycles       int64   `json:"lifecycles"`
	LifecyclesPerSec float64 `json:"lifecycles_per_sec"`
	// Throughput in the first and the last quarter of the run: a room whose
	// per-commit cost grows with its history slows down as it runs.
	FirstQuarterPerSec float64            `json:"lifecycles_per_sec_first_quarter"`
	LastQuarterPerSec  float64            `json:"lifecycles_per_sec_last_quarter"`
	StepsPerSec        float64            `json:"steps_per_sec"`
	Steps              map[string]latency `json:"steps"`
	RefusedCreates     int64              `json:"limit_exceeded_creates"`
	RefusedLatency     latency            `json:"limit_exceeded_latency"`
	MaxActiveTasks     int                `json:"max_active_tasks"`
	MetricsSamples     int                `json:"metrics_samples"`
	Commands           int64              `json:"writer_commands"`
	Batches            int64              `json:"writer_batches"`
	CommandsPerBatch   float64            `json:"commands_per_batch"`
	BatchesPerSec      float64            `json:"batches_per_sec"`
	CPU                cpuUse             `json:"cpu"`
	// Requests is every answered request of the window (each step, each
	// refused create); CPUPerRequestUs is ce's CPU per request (µs).
	Requests        int64   `json:"requests"`
	CPUPerRequestUs float64 `json:"server_cpu_per_request_us"`
	// WriterCPUPerCommandUs is the writer goroutine's CPU per command
	// (µs), from writer.cpu_seconds of /debug/metrics when the room
	// reports it (WriterCPUSource "writer"); otherwise the whole process's
	// CPU per command (WriterCPUSource "process"), an upper bound.
	WriterCPUPerCommandUs float64 `json:"writer_cpu_per_command_us"`
	WriterCPUSource       string  `json:"writer_cpu_source"`
}

// lifecycleAgent is one agent's three participants: the creator proposes,
// a different participant (the worker, with checkout) accepts and
// completes, and an approver who is not the assignee approves.
type lifecycleAgent struct {
	creator, worker, approver *mcpClient
	workerID                  string
}

// runLifecycle drives N agents through create → accept → complete → approve
// for the configured duration against one room, while a sampler watches the
// room's own active-task count every 50 ms.
func runLifecycle(ctx context.Context, e *env, c *ceServer, label string) (*lifecycleResult, error) {
	n := e.cfg.agents
	rc := newRoomClient(c, 3*n)
	defer rc.close()
	creators, err := rc.sessions(ctx, "creator", n, "read", "propose")
	if err != nil {
		return nil, err
	}
	workers, err := rc.sessions(ctx, "worker", n, "read", "checkout")
	if err != nil {
		return nil, err
	}
	approvers, err := rc.sessions(ctx, "approver", n, "read", "approve")
	if err != nil {
		return nil, err
	}
	agents := make([]lifecycleAgent, n)
	for i := range agents {
		agents[i] = lifecycleAgent{creator: rc.mcp(creators[i]), worker: rc.mcp(workers[i]), approver: rc.mcp(approvers[i]),
			workerID: workers[i].ParticipantID}
	}

	e.waitQuiet(ctx, "lifecycle "+label)
	e.logf("lifecycle (%s): %d agents for %s", label, n, e.cfg.duration)
	m0, err := c.metrics(ctx) // right before the window: writer commands and CPU
	if err != nil {
		return nil, err
	}
	smp := startSampler(ctx, c, 50*time.Millisecond)
	cpu := startCPU(c)
	start := time.Now()
	deadline := start.Add(e.cfg.duration)
	hists := make([][]hist, n) // per agent, per step
	refused := make([]hist, n)
	var lifecycles, refusedN, requests atomic.Int64
	// Completions per 100 ms slot since start, for the quarter rates.
	slots := make([]atomic.Int64, int(e.cfg.duration/(100*time.Millisecond))+600)
	var wg sync.WaitGroup
	progressDone := e.progressTicker(ctx, "lifecycle "+label, func() string {
		return fmt.Sprintf("%d lifecycles, %d refused creates", lifecycles.Load(), refusedN.Load())
	})
	for i := range agents {
		hists[i] = make([]hist, len(lifecycleSteps))
		wg.Go(func() {
			a := &agents[i]
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				t0 := time.Now()
				h, err := a.creator.createHandoff(ctx, fmt.Sprintf("bench work %d/%d", i, k), a.workerID)
				if isLimitExceeded(err) {
					refused[i].add(time.Since(t0))
					refusedN.Add(1)
					requests.Add(1)
					// A polite client backs off before retrying the cap.
					time.Sleep(2*time.Millisecond + time.Duration(rng.IntN(3000))*time.Microsecond)
					continue
				}
				if err != nil {
					e.fault(ctx, "lifecycle create", err)
					return
				}
				hists[i][0].add(time.Since(t0))
				requests.Add(1)
				// The lifecycle is finished even past the deadline, so the
				// room is left with no active task of ours.
				steps := []func() error{
					func() error { return a.worker.handoffAction(ctx, "handoff_accept", h.ID, nil) },
					func() error { return a.worker.handoffAction(ctx, "handoff_complete", h.ID, completeArgs) },
					func() error { return a.approver.handoffAction(ctx, "handoff_approve", h.ID, nil) },
				}
				for s, step := range steps {
					t := time.Now()
					if err := step(); err != nil {
						e.fault(ctx, "lifecycle "+lifecycleSteps[s+1], err)
						return
					}
					hists[i][s+1].add(time.Since(t))
					requests.Add(1)
				}
				lifecycles.Add(1)
				if k := int(time.Since(start) / (100 * time.Millisecond)); k < len(slots) {
					slots[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	progressDone()
	use := cpu.stop()
	maxAct, samples, _, merrs, merr := smp.finish()
	if merrs > 0 {
		e.faults.add("metrics", fmt.Sprintf("%d failed /debug/metrics polls, last: %v", merrs, merr))
	}
	m1, err := c.metrics(ctx)
	if err != nil {
		return nil, err
	}
	maxAct = max(maxAct, m1.Room.ActiveTasks)

	r := &lifecycleResult{Agents: n, Seconds: elapsed.Seconds(), Lifecycles: lifecycles.Load(), Steps: map[string]latency{},
		RefusedCreates: refusedN.Load(), MaxActiveTasks: maxAct, MetricsSamples: samples, CPU: use,
		Commands: m1.Writer.Commands - m0.Writer.Commands, Batches: m1.Writer.Batches - m0.Writer.Batches}
	r.LifecyclesPerSec = float64(r.Lifecycles) / r.Seconds
	r.Requests = requests.Load()
	r.CPUPerRequestUs = use.perRequestUs(r.Requests)
	r.WriterCPUPerCommandUs, r.WriterCPUSource = writerCPUPerCommand(m0, m1, use)
	q := int(e.cfg.duration / (100 * time.Millisecond) / 4)
	if q > 0 {
		var first, last int64
		for i := range q {
			first += slots[i].Load()
			last += slots[3*q+i].Load()
		}
		r.FirstQuarterPerSec = float64(first) / (float64(q) / 10)
		r.LastQuarterPerSec = float64(last) / (float64(q) / 10)
	}
	r.StepsPerSec = 4 * r.LifecyclesPerSec
	if r.Batches > 0 {
		r.CommandsPerBatch = float64(r.Commands) / float64(r.Batches)
	}
	r.BatchesPerSec = float64(r.Batches) / r.Seconds
	for s, name := range lifecycleSteps {
		var all hist
		for i := range hists {
			all.merge(&hists[i][s])
		}
		r.Steps[name] = all.summary()
	}
	var ref hist
	for i := range refused {
		ref.merge(&refused[i])
	}
	r.RefusedLatency = ref.summary()
	if maxAct > maxActiveTasks {
		e.rep.violation(fmt.Sprintf("lifecycle (%s): the room reported %d active tasks, above the cap of %d", label, maxAct, maxActiveTasks))
	}
	if samples == 0 {
		e.rep.violation(fmt.Sprintf("lifecycle (%s): no /debug/metrics sample, so the cap was never checked", label))
	}
	return r, nil
}

// scenarioLifecycle runs the lifecycle with group commit on (the room's
// default) and again on a second room with --max-batch 1, and reports both.
func scenarioLifecycle(ctx context.Context, e *env) error {
	c, err := e.room(ctx, "lifecycle", false)
	if err != nil {
		return err
	}
	on, err := runLifecycle(ctx, e, c, "group commit on")
	e.release(c)
	if err != nil {
		return err
	}
	on.MaxBatch = "default"
	if e.target != nil {
		on.MaxBatch = "target room"
	}
	e.rep.Lifecycle = on
	e.rep.printLifecycle(on, "")

	off, err := e.room(ctx, "lifecycle-nogc", true, "--max-batch", "1")
	if err != nil {
		return err
	}
	r2, err := runLifecycle(ctx, e, off, "group commit off")
	e.release(off)
	if err != nil {
		return err
	}
	r2.MaxBatch = "1"
	e.rep.LifecycleNoGC = r2
	e.rep.printLifecycle(r2, "nogc")
	e.rep.printLifecycleRatios()
	return nil
}

// writerCPUPerCommand is the writer's CPU per command (µs) between two
// /debug/metrics readings taken right around the window: from the writer's
// own cpu_seconds when the room reports it, else the whole process's CPU
// per command, labelled so ("process"): an upper bound that includes every
// reader and the HTTP front door.
func writerCPUPerCommand(m0, m1 roomMetrics, use cpuUse) (float64, string) {
	cmds := m1.Writer.Commands - m0.Writer.Commands
	if cmds <= 0 {
		return 0, ""
	}
	if m0.Writer.CPUSeconds != nil && m1.Writer.CPUSeconds != nil {
		return 1e6 * (*m1.Writer.CPUSeconds - *m0.Writer.CPUSeconds) / float64(cmds), "writer"
	}
	return 1e6 * use.CeSeconds / float64(cmds), "process"
}
