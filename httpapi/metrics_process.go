package httpapi

import (
	"runtime"
	"runtime/metrics"
)

// processSamples are the Go runtime figures /debug/metrics reports. They are
// read with runtime/metrics, which does not stop the world, so the bench can
// poll the endpoint every few milliseconds without disturbing the room.
var processSamples = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
}

// processStats is the "process" block of /debug/metrics: a room meant to run
// for months must show whether its goroutines and heap stay flat (the soak
// reads them next to RSS and open descriptors, which come from /proc).
func processStats() map[string]any {
	s := make([]metrics.Sample, len(processSamples))
	for i, name := range processSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	val := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return map[string]any{
		"goroutines":      val(0),
		"heap_live_bytes": val(1),
		"go_mapped_bytes": val(2),
		"gc_cycles":       val(3),
		"gomaxprocs":      runtime.GOMAXPROCS(0),
	}
}
