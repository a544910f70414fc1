package listen

import "testing"

// scriptedProbe returns its samples in order; ok is false once they run out.
type scriptedProbe struct {
	samples []probeSample
	taken   int
}

type probeSample struct {
	queued int
	acked  uint64
}

func (p *scriptedProbe) Sample() (int, uint64, bool) {
	if p.taken >= len(p.samples) {
		return 0, 0, false
	}
	s := p.samples[p.taken]
	p.taken++
	return s.queued, s.acked, true
}

// The no-progress rule, step by step: each step is a tick at a time (ms),
// whether the stream wrote since the last tick, the sample the tick would
// take, and whether the stream counts as stalled then.
func TestStallWatchRule(t *testing.T) {
	const maxLag = 1000 // ms
	type step struct {
		at      int64
		wrote   bool
		sample  probeSample
		sampled bool // the tick reads the socket
		stalled bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"an idle stream is never sampled", []step{
			{at: 0, wrote: false},
			{at: 5000, wrote: false},
		}},
		{"bytes that drain are forgotten", []step{
			{at: 0, wrote: true, sample: probeSample{100, 10}, sampled: true},
			{at: 500, sample: probeSample{0, 110}, sampled: true},
			{at: 5000},
		}},
		{"queued bytes with no acknowledgement for max lag stall", []step{
			{at: 0, wrote: true, sample: probeSample{100, 10}, sampled: true},
			{at: 600, sample: probeSample{100, 10}, sampled: true},
			{at: 999, sample: probeSample{140, 10}, sampled: true},
			{at: 1000, sample: probeSample{140, 10}, sampled: true, stalled: true},
		}},
		{"any acknowledgement restarts the clock", []step{
			{at: 0, wrote: true, sample: probeSample{100, 10}, sampled: true},
			{at: 900, sample: probeSample{100, 11}, sampled: true},
			{at: 1800, sample: probeSample{100, 11}, sampled: true},
			{at: 1900, sample: probeSample{100, 11}, sampled: true, stalled: true},
		}},
		{"a slow reader that keeps acknowledging is never dropped", []step{
			{at: 0, wrote: true, sample: probeSample{1 << 20, 0}, sampled: true},
			{at: 900, wrote: true, sample: probeSample{1 << 20, 1000}, sampled: true},
			{at: 1800, wrote: true, sample: probeSample{1 << 20, 2000}, sampled: true},
			{at: 2700, wrote: true, sample: probeSample{1 << 20, 3000}, sampled: true},
		}},
		{"draining resets, so a later stall is timed from its own start", []step{
			{at: 0, wrote: true, sample: probeSample{100, 10}, sampled: true},
			{at: 900, sample: probeSample{0, 110}, sampled: true},
			{at: 5000, wrote: true, sample: probeSample{50, 110}, sampled: true},
			{at: 5999, sample: probeSample{50, 110}, sampled: true},
			{at: 6000, sample: probeSample{50, 110}, sampled: true, stalled: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &scriptedProbe{}
			for _, s := range c.steps {
				if s.sampled {
					p.samples = append(p.samples, s.sample)
				}
			}
			w := stallWatch{probe: p}
			for i, s := range c.steps {
				if s.wrote {
					w.dirty = true
				}
				before := p.taken
				got := w.check(s.at*1e6, maxLag*1e6)
				if sampled := p.taken > before; sampled != s.sampled {
					t.Fatalf("step %d (t=%dms): sampled = %v, want %v", i, s.at, sampled, s.sampled)
				}
				if got != s.stalled {
					t.Fatalf("step %d (t=%dms): stalled = %v, want %v", i, s.at, got, s.stalled)
				}
			}
		})
	}

	t.Run("a socket that cannot be read stops the probing", func(t *testing.T) {
		w := stallWatch{probe: &scriptedProbe{}, dirty: true}
		if w.check(0, maxLag) || w.probe != nil {
			t.Fatalf("after a failed sample: probe %v, want none", w.probe)
		}
		w.dirty = true
		if w.check(10*maxLag*1e6, maxLag*1e6) {
			t.Fatal("a stream without a probe was judged stalled")
		}
	})
}
