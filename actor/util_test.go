package actor

import (
	"time"

	"github.com/commonroom/ce/room"
)

// fakeClock is a clock tests move by hand; safe for the writer to read.
type fakeClock = room.ManualClock

func newFakeClock() *fakeClock {
	return room.NewManualClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
}
