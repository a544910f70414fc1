package room

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention is the host's retention policy (issue 26, item 2): how long
// each kind of finished record is kept before the sweeper prunes it. A
// zero window keeps that kind for ever, which is the default for all of
// them: the brief promises that a handoff outlives its task, so nothing is
// pruned unless the host asks.
type Retention struct {
	// Handoffs: a terminal handoff (approved, rejected, cancelled) whose
	// last change is older than this is deleted with its task, input
	// requests and events; never a live one, never one another handoff
	// follows (follows_handoff_id).
	Handoffs time.Duration
	// Participants: a participant that left longer ago than this is
	// deleted once nothing else in the sidecar names it.
	Participants time.Duration
	// Sessions: an ended session (and a released lease) older than this.
	Sessions time.Duration
	// Invitations: an invitation revoked, expired or used up longer ago
	// than this.
	Invitations time.Duration
	// Proposals: a decided proposal (rejected, committed, conflicted,
	// superseded) whose last change is older than this, text and all.
	Proposals time.Duration
	// Versions: every version younger than this is kept; before it, one a
	// UTC day (the day's last). The newest version and any version a
	// proposal or a live handoff is based on are always kept.
	Versions time.Duration
}

// MaxRetentionWindow is the longest window accepted: a longer one is
// almost certainly a typo (36500d for 365d), and "for ever" is written by
// leaving the window unset.
const MaxRetentionWindow = 10 * 365 * 24 * time.Hour

// MinRetentionWindow is the shortest window accepted: the task TTL's
// ceiling (24 h). The brief's purge rules run on that clock, and a record
// pruned sooner could vanish under a task that still names it.
const MinRetentionWindow = 24 * time.Hour

// Enabled reports whether any window is set.
func (r Retention) Enabled() bool {
	return r.Handoffs > 0 || r.Participants > 0 || r.Sessions > 0 || r.Invitations > 0 || r.Proposals > 0 || r.Versions > 0
}

// Windows names each window as its ce serve flag does, in a fixed order.
func (r Retention) Windows() []NamedWindow {
	return []NamedWindow{{"handoffs", r.Handoffs}, {"participants", r.Participants}, {"sessions", r.Sessions},
		{"invitations", r.Invitations}, {"proposals", r.Proposals}, {"versions", r.Versions}}
}

// NamedWindow is one window of a Retention with its name.
type NamedWindow struct {
	Name   string
	Window time.Duration
}

// ParseRetentionWindow reads a window as ce serve takes it: a whole number
// of days ("180d"), or a Go duration ("36h", "90m"). The empty string is
// "not set" (0, keep for ever). Anything else, 0, a negative window, one
// shorter than MinRetentionWindow or longer than MaxRetentionWindow is
// refused with a message that says why.
func ParseRetentionWindow(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days (write e.g. 180d or 36h)", s)
		}
		if n > int64(MaxRetentionWindow/(24*time.Hour)) || n < -int64(MaxRetentionWindow/(24*time.Hour)) {
			return 0, fmt.Errorf("%s is longer than the longest window, %dd; leave the flag unset to keep for ever", s, MaxRetentionWindow/(24*time.Hour))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a window (write e.g. 180d or 36h)", s)
		}
	}
	return d, checkWindow(s, d)
}

func checkWindow(s string, d time.Duration) error {
	switch {
	case d == 0:
		return fmt.Errorf("a window of 0 would prune at once; leave the flag unset to keep for ever")
	case d < 0:
		return fmt.Errorf("%s is negative; a window is how long a finished record is kept", s)
	case d < MinRetentionWindow:
		return fmt.Errorf("%s is shorter than the task TTL of 24h; records are kept at least that long", s)
	case d > MaxRetentionWindow:
		return fmt.Errorf("%s is longer than the longest window, %dd; leave the flag unset to keep for ever", s, MaxRetentionWindow/(24*time.Hour))
	}
	return nil
}

// Validate checks every set window (see ParseRetentionWindow).
func (r Retention) Validate() error {
	for _, w := range r.Windows() {
		if w.Window == 0 {
			continue
		}
		if err := checkWindow(w.Window.String(), w.Window); err != nil {
			return fmt.Errorf("--retain-%s: %v", w.Name, err)
		}
	}
	return nil
}
