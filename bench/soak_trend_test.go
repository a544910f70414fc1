package main

import (
	"math"
	"reflect"
	"testing"
)

func TestSlopeIsLeastSquares(t *testing.T) {
	for _, c := range []struct {
		name string
		x, y []float64
		want float64
	}{
		{"a straight line gives its slope", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2},
		{"a flat series gives zero", []float64{0, 10, 20}, []float64{4, 4, 4}, 0},
		{"one outlier moves it less than end minus start", []float64{0, 1, 2, 3, 4}, []float64{1, 1, 1, 1, 9}, 1.6},
		{"a single point has no slope", []float64{3}, []float64{7}, 0},
		{"identical times have no slope", []float64{2, 2}, []float64{1, 5}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := slope(c.x, c.y); math.Abs(got-c.want) > 1e-9 {
				t.Errorf("slope = %v, want %v", got, c.want)
			}
		})
	}
}

func TestTrendLeavesTheWarmupOutOfTheSlope(t *testing.T) {
	// Fast growth during the warm-up, flat afterwards: the slope is 0 and
	// the value at the warm-up is the first sample at or after it.
	var samples []soakSample
	for i, kb := range []int64{1024, 10240, 20480, 20480, 20480, 20480} {
		samples = append(samples, soakSample{T: float64(10 * i), RSSKB: kb})
	}
	tr := trendOf("RSS", "MiB", samples, 20, func(s soakSample) float64 { return float64(s.RSSKB) / 1024 })
	want := soakTrend{Name: "RSS", Unit: "MiB", Start: 1, AtWarmup: 20, End: 20, Min: 1, Max: 20, Samples: 4}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("trend = %+v, want %+v", tr, want)
	}
	// Growth after the warm-up shows per hour and relative to the warm value.
	samples = append(samples, soakSample{T: 60, RSSKB: 20480 + 1024*6})
	tr = trendOf("RSS", "MiB", samples, 20, func(s soakSample) float64 { return float64(s.RSSKB) / 1024 })
	if tr.SlopePerHour <= 0 || math.Abs(tr.RelativePerHour-tr.SlopePerHour/20) > 1e-9 {
		t.Errorf("growth after the warm-up: slope %v/h, relative %v/h", tr.SlopePerHour, tr.RelativePerHour)
	}
}

func TestGoroutineCountsByEntryFunction(t *testing.T) {
	profile := `goroutine profile: total 5
3 @ 0x1 0x2
#	0x4a	internal/poll.(*FD).Read+0x2a	/go/src/internal/poll/fd_unix.go:165
#	0x4b	net/http.(*conn).serve+0x5b	/go/src/net/http/server.go:2100

2 @ 0x3
#	0x4c	runtime.gopark+0x1	/go/src/runtime/proc.go:400
#	0x4d	github.com/commonroom/ce/listen.(*Hub).run+0x10	/src/listen/hub.go:360

`
	got := goroutineCounts(profile)
	want := map[string]int{"net/http.(*conn).serve": 3, "github.com/commonroom/ce/listen.(*Hub).run": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
	d := goroutineDelta(want, map[string]int{"net/http.(*conn).serve": 5})
	if !reflect.DeepEqual(d, map[string]int{"net/http.(*conn).serve": 2, "github.com/commonroom/ce/listen.(*Hub).run": -2}) {
		t.Errorf("delta = %v", d)
	}
}
