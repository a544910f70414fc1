package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Latencies are kept in log-linear buckets (32 per power of two, so at most
// ~3% error) rather than as raw samples: a 10,000-stream fan-out produces
// millions of samples per second and sorting them would cost more than the
// thing being measured.
const (
	histExact   = 64 // values below this (ns) get a bucket each
	histSub     = 32 // buckets per power of two above that
	histBuckets = histExact + (64-6)*histSub
)

func histIndex(v uint64) int {
	if v < histExact {
		return int(v)
	}
	e := bits.Len64(v) - 6 // v>>e is in [32, 63]
	return histExact + (e-1)*histSub + int(v>>e) - histSub
}

// histValue is the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < histExact {
		return uint64(i)
	}
	e := (i-histExact)/histSub + 1
	m := uint64((i-histExact)%histSub + histSub)
	lo := m << e
	return lo + (uint64(1)<<e)/2
}

// hist is a single-goroutine latency histogram; each worker owns one and
// they are merged once the workers have stopped.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

func (h *hist) add(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q ≤ 1), or 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(histValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// atomicHist is shared by many goroutines (one per listen stream), where a
// histogram per stream would cost 15 KB × 10,000.
type atomicHist struct {
	counts [histBuckets]atomic.Uint64
	max    atomic.Uint64
}

func (h *atomicHist) add(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)].Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (h *atomicHist) snapshot() *hist {
	out := &hist{}
	for i := range h.counts {
		c := h.counts[i].Load()
		out.counts[i] = c
		out.n += c
	}
	out.max = h.max.Load()
	return out
}

// latency is how a histogram appears in reports.
type latency struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func (h *hist) summary() latency {
	return latency{Count: int64(h.n), P50Ms: ms(h.quantile(0.50)), P99Ms: ms(h.quantile(0.99)), MaxMs: ms(time.Duration(h.max))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
