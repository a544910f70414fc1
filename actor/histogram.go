package actor

import (
	"math"
	"sync/atomic"
)

// Histogram counts observations into fixed buckets with atomics only, so
// the writer can observe every batch without a lock and without the actor
// knowing any metrics library: httpapi reads a Snapshot at scrape time and
// exposes it (as a Prometheus histogram). The zero value and a nil
// *Histogram observe nothing.
type Histogram struct {
	bounds  []float64       // upper bounds, ascending; an implicit +Inf follows
	buckets []atomic.Uint64 // len(bounds)+1, not cumulative
	sum     atomic.Uint64   // float64 bits
}

// NewHistogram makes a histogram with the given ascending upper bounds.
func NewHistogram(bounds ...float64) *Histogram {
	return &Histogram{bounds: bounds, buckets: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	if h == nil || h.buckets == nil {
		return
	}
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramSnapshot is a histogram read at one moment: Cumulative[i] is how
// many observations were at most Bounds[i]; Count includes those above the
// last bound. Count is the buckets' own total, so the snapshot is
// consistent even while the writer observes.
type HistogramSnapshot struct {
	Bounds     []float64
	Cumulative []uint64
	Count      uint64
	Sum        float64
}

// Snapshot reads the histogram.
func (h *Histogram) Snapshot() HistogramSnapshot {
	if h == nil || h.buckets == nil {
		return HistogramSnapshot{}
	}
	s := HistogramSnapshot{Bounds: h.bounds, Cumulative: make([]uint64, len(h.bounds)), Sum: math.Float64frombits(h.sum.Load())}
	for i := range h.buckets {
		s.Count += h.buckets[i].Load()
		if i < len(h.bounds) {
			s.Cumulative[i] = s.Count
		}
	}
	return s
}

// commitBounds are the commit histogram's buckets in seconds: a COMMIT is
// one WAL append and one fsync, from a fraction of a millisecond on a fast
// SSD to seconds on a disk that is failing.
var commitBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// batchBounds are the batch-size histogram's buckets in commands: powers of
// two up to the default --max-batch and one above it.
var batchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128}
