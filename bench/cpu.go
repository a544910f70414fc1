package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime is the room process's user+system CPU time so far, from
// /proc/<pid>/stat (clock ticks of 10 ms). ce has no pprof endpoint, so CPU
// use per phase is the main evidence of what bounds a figure.
func (c *ceServer) cpuTime() time.Duration { return procCPU(c.pid) }

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name, which may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU is the bench process's own CPU time: the load generator shares
// the two cores with the room, so its cost is part of every figure.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineJiffies reads the first line of /proc/stat: busy and total ticks
// over all cores since boot.
func machineJiffies() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	v := make([]int64, 8)
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return busy, busy + v[3] + v[4]
}

// cpuMeter measures the CPU the room, the bench and everything else on the
// machine used over a phase, each as a percentage of one core. The machine
// is shared: other processes' CPU is reported so a figure taken while
// someone else was busy can be recognised as such.
type cpuMeter struct {
	c           *ceServer
	start       time.Time
	ce0, self0  time.Duration
	busy0, tot0 int64
}

func startCPU(c *ceServer) cpuMeter {
	b, t := machineJiffies()
	return cpuMeter{c: c, start: time.Now(), ce0: c.cpuTime(), self0: selfCPU(), busy0: b, tot0: t}
}

type cpuUse struct {
	CePct    float64 `json:"ce_cpu_pct"`
	BenchPct float64 `json:"bench_cpu_pct"`
	// CeSeconds and BenchSeconds are the CPU time each used over the
	// window (utime+stime from /proc/<pid>/stat and getrusage), from which
	// the cost per request is computed: a rate alone hides what the load
	// generator, sharing the cores, takes from the server.
	CeSeconds    float64 `json:"ce_cpu_seconds"`
	BenchSeconds float64 `json:"bench_cpu_seconds"`
	MachinePct   float64 `json:"machine_cpu_pct"` // all processes, % of one core (the ceiling is cores × 100)
	OthersPct    float64 `json:"others_cpu_pct"`  // machine − ce − bench
}

func (m cpuMeter) stop() cpuUse {
	el := time.Since(m.start).Seconds()
	if el <= 0 {
		return cpuUse{}
	}
	ce, self := (m.c.cpuTime() - m.ce0).Seconds(), (selfCPU() - m.self0).Seconds()
	u := cpuUse{CePct: 100 * ce / el, BenchPct: 100 * self / el, CeSeconds: ce, BenchSeconds: self}
	if m.c.pid == os.Getpid() {
		u.CePct, u.CeSeconds = 0, 0 // an in-process server: the bench is all there is
	}
	if b, t := machineJiffies(); t > m.tot0 {
		u.MachinePct = 100 * float64(runtime.NumCPU()) * float64(b-m.busy0) / float64(t-m.tot0)
		u.OthersPct = max(u.MachinePct-u.CePct-u.BenchPct, 0)
	}
	return u
}

func (u cpuUse) String() string { return u.label("ce") }

// minCPUForCost is the least server CPU over a window for a cost per
// request to be reported: /proc counts in 10 ms ticks, so below 100 ms
// (an idle phase, like polling at the room's interval) the figure is
// mostly rounding.
const minCPUForCost = 0.1

// perRequestUs is the server's CPU per request in µs over the window, or 0
// when too little was measured to say (see minCPUForCost).
func (u cpuUse) perRequestUs(requests int64) float64 {
	if requests <= 0 || u.CeSeconds < minCPUForCost {
		return 0
	}
	return 1e6 * u.CeSeconds / float64(requests)
}

// label names the measured server process, which is not always ce (the
// bare SSE baseline runs in a process of its own too).
func (u cpuUse) label(server string) string {
	return fmt.Sprintf("CPU %s %.0f%% / bench %.0f%% / others %.0f%%", server, u.CePct, u.BenchPct, u.OthersPct)
}
