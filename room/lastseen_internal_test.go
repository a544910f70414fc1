package room

import (
	"fmt"
	"sync"
	"testing"
)

// TestLastSeen_AUseIsNeverLostToAConcurrentTake: sessions noting uses while
// the sweeper takes them again and again; every session's last use is in
// some take (or the final one), and no take reports a time nobody noted.
func TestLastSeen_AUseIsNeverLostToAConcurrentTake(t *testing.T) {
	const sessions, uses = 8, 2000
	var l lastSeen
	var wg sync.WaitGroup
	// The taker folds each take into last as it goes: sending takes to a
	// buffered channel drained only at the end deadlocked once the writers
	// had been taken from more times than the buffer held.
	last := map[string]int64{}
	var bad []string
	stop := make(chan struct{})
	var taker sync.WaitGroup
	taker.Add(1)
	go func() {
		defer taker.Done()
		for {
			select {
			case <-stop:
				return
			default:
				for ref, at := range l.take() {
					if at < 1 || at > uses {
						bad = append(bad, fmt.Sprintf("%s at %d", ref, at))
					}
					last[ref] = max(last[ref], at)
				}
			}
		}
	}()
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := fmt.Sprintf("s%d", s)
			for at := int64(1); at <= uses; at++ {
				l.touch(ref, at)
				if got, ok := l.get(ref); ok && (got < 1 || got > uses) {
					t.Errorf("get(%s) = %d", ref, got)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	taker.Wait()
	if len(bad) > 0 {
		t.Fatalf("a take reported %v", bad)
	}
	for ref, at := range l.take() {
		last[ref] = max(last[ref], at)
	}
	for s := range sessions {
		if ref := fmt.Sprintf("s%d", s); last[ref] != uses {
			t.Errorf("%s: the last use seen by a take is %d, want %d", ref, last[ref], uses)
		}
	}
	if m := l.take(); m != nil {
		t.Errorf("a take after everything was taken: %v", m)
	}
}

// TestLastSeen_NotingAUseAgainAllocatesNothing: every authenticated request
// notes a use; for a session already noted since the last flush that costs
// no allocation (it cost one: the time boxed for sync.Map.Store).
func TestLastSeen_NotingAUseAgainAllocatesNothing(t *testing.T) {
	var l lastSeen
	l.touch("s", 1)
	at := int64(1)
	if n := testing.AllocsPerRun(1000, func() { at++; l.touch("s", at) }); n != 0 {
		t.Fatalf("%.1f allocations per noted use", n)
	}
	if got, ok := l.get("s"); !ok || got != at {
		t.Fatalf("get = %d, %v; want %d", got, ok, at)
	}
}
