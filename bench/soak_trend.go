package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// soakSample is one look at the room during the soak: the process as the
// kernel sees it (/proc), the Go runtime and the room's own counts as it
// reports them (/debug/metrics), and the sidecar's files on disk.
type soakSample struct {
	T            float64 `json:"t_seconds"` // since the load started
	RSSKB        int64   `json:"rss_kb"`
	FDs          int     `json:"open_fds"`
	Goroutines   int64   `json:"goroutines"`
	HeapBytes    int64   `json:"heap_live_bytes"`
	GoMapped     int64   `json:"go_mapped_bytes"` // all the Go runtime maps; RSS minus this is mostly SQLite's own heap
	DBBytes      int64   `json:"sidecar_db_bytes"`
	WALBytes     int64   `json:"sidecar_wal_bytes"`
	Subscribers  int     `json:"subscribers"`
	LiveSessions int     `json:"live_sessions"`
	ActiveTasks  int     `json:"active_tasks"`
	Handoffs     int     `json:"handoffs"`  // cached by the room for up to 5 s
	TaskRows     int     `json:"task_rows"` // likewise
}

// soakTrend is one quantity over the run: where it started, where it was
// when the warm-up ended, where it ended, and its least-squares slope over
// the samples after the warm-up, per hour. Flat after the warm-up is the
// goal; a slope is judged by reading it, never by a threshold.
type soakTrend struct {
	Name         string  `json:"name"`
	Unit         string  `json:"unit"`
	Part         bool    `json:"part_of_the_one_above,omitempty"` // printed indented under the quantity before it
	Start        float64 `json:"start"`
	AtWarmup     float64 `json:"at_warmup"`
	End          float64 `json:"end"`
	Min          float64 `json:"min"`
	Max          float64 `json:"max"`
	SlopePerHour float64 `json:"slope_per_hour"`
	// RelativePerHour is the slope as a share of the value at the end of the
	// warm-up (0.05 = 5% per hour), so quantities of any size compare.
	RelativePerHour float64 `json:"relative_slope_per_hour"`
	Samples         int     `json:"samples_after_warmup"`
}

// soakQuantities are the trends the soak reports, in the order printed.
var soakQuantities = []struct {
	name, unit string
	part       bool // a part of the quantity above it
	get        func(soakSample) float64
}{
	{"RSS", "MiB", false, func(s soakSample) float64 { return float64(s.RSSKB) / 1024 }},
	{"Go runtime, all it maps", "MiB", true, func(s soakSample) float64 { return float64(s.GoMapped) / (1 << 20) }},
	{"Go heap, live objects", "MiB", true, func(s soakSample) float64 { return float64(s.HeapBytes) / (1 << 20) }},
	{"goroutines", "", false, func(s soakSample) float64 { return float64(s.Goroutines) }},
	{"open file descriptors", "", false, func(s soakSample) float64 { return float64(s.FDs) }},
	{"sidecar, db + wal", "MiB", false, func(s soakSample) float64 { return float64(s.DBBytes+s.WALBytes) / (1 << 20) }},
	{"of which the db file", "MiB", true, func(s soakSample) float64 { return float64(s.DBBytes) / (1 << 20) }},
	{"of which the wal file", "MiB", true, func(s soakSample) float64 { return float64(s.WALBytes) / (1 << 20) }},
	{"listen streams held by the room", "", false, func(s soakSample) float64 { return float64(s.Subscribers) }},
	{"live sessions", "", false, func(s soakSample) float64 { return float64(s.LiveSessions) }},
	{"task rows (purged one TTL after the end)", "", false, func(s soakSample) float64 { return float64(s.TaskRows) }},
	{"handoffs (kept for good)", "", false, func(s soakSample) float64 { return float64(s.Handoffs) }},
}

// soakTrends computes every quantity's trend; samples at or after warmup
// seconds feed the slope.
func soakTrends(samples []soakSample, warmup float64) []soakTrend {
	var out []soakTrend
	for _, q := range soakQuantities {
		tr := trendOf(q.name, q.unit, samples, warmup, q.get)
		tr.Part = q.part
		out = append(out, tr)
	}
	return out
}

func trendOf(name, unit string, samples []soakSample, warmup float64, get func(soakSample) float64) soakTrend {
	tr := soakTrend{Name: name, Unit: unit}
	if len(samples) == 0 {
		return tr
	}
	tr.Start, tr.End = get(samples[0]), get(samples[len(samples)-1])
	tr.Min, tr.Max = math.Inf(1), math.Inf(-1)
	var ts, ys []float64
	for _, s := range samples {
		v := get(s)
		tr.Min, tr.Max = min(tr.Min, v), max(tr.Max, v)
		if s.T >= warmup {
			if len(ts) == 0 {
				tr.AtWarmup = v
			}
			ts, ys = append(ts, s.T), append(ys, v)
		}
	}
	tr.Samples = len(ts)
	tr.SlopePerHour = slope(ts, ys) * 3600
	if tr.AtWarmup != 0 {
		tr.RelativePerHour = tr.SlopePerHour / math.Abs(tr.AtWarmup)
	}
	return tr
}

// slope is the least-squares slope of y over x (0 with fewer than two
// distinct x): one outlier sample moves it far less than end minus start.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 || len(x) != len(y) {
		return 0
	}
	var sx, sy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// line formats one trend for the table: start → end as the value, then the
// value after the warm-up and the slope with its unit and relative size.
func (tr soakTrend) line() (value, vs string) {
	u := tr.Unit
	if u != "" {
		u = " " + u
	}
	value = fmt.Sprintf("%s → %s", num(tr.Start), num(tr.End))
	vs = fmt.Sprintf("after warm-up %s; slope %+.3g%s/h", num(tr.AtWarmup), tr.SlopePerHour, u)
	if tr.AtWarmup != 0 {
		vs += fmt.Sprintf(" (%+.1f%%/h)", 100*tr.RelativePerHour)
	}
	vs += fmt.Sprintf("; min %s, max %s", num(tr.Min), num(tr.Max))
	return value, vs
}

// goroutineCounts reads the room's goroutine profile (debug=1: one block per
// distinct stack, headed by its count) and counts goroutines by the
// function each one started in, so a difference between two idle moments
// names what was left behind.
func goroutineCounts(profile string) map[string]int {
	out := map[string]int{}
	for _, block := range strings.Split(profile, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 {
			continue
		}
		head := lines[0]
		if strings.HasPrefix(head, "goroutine profile:") {
			if len(lines) < 3 {
				continue
			}
			lines = lines[1:]
			head = lines[0]
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(head, "@", 2)[0]))
		if err != nil {
			continue
		}
		entry := ""
		for _, l := range lines[1:] {
			if f := strings.Fields(strings.TrimPrefix(l, "#")); len(f) >= 2 {
				fn := f[1]
				if i := strings.LastIndex(fn, "+0x"); i > 0 {
					fn = fn[:i]
				}
				entry = fn // the last frame is where the goroutine started
			}
		}
		if entry != "" {
			out[entry] += n
		}
	}
	return out
}

// goroutineDelta is after minus before, keeping only what changed.
func goroutineDelta(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			out[k] = -v
		}
	}
	return out
}
