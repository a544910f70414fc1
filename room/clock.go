package room

import (
	"sync"
	"time"
)

// ManualClock is a clock that moves only when told. Tests (and anything that
// simulates time) inject its Now as Engine.Clock so TTLs, expiries and lease
// caps can be checked to the millisecond without waiting.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock starts a clock at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now reads the clock; safe for the writer and readers at once.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
