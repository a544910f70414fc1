package room_test

// Sliding sessions (issue 16, item 4): each authenticated use extends a
// session's expiry by its idle window, never past the room's maximum
// lifetime; the sweeper ends a session exactly when authentication starts
// refusing it; and a slide survives a restart to within the last-seen flush.

import (
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// sessionExpiresAt is the session's expiry as the sidecar holds it (ms).
func (e *env) sessionExpiresAt(ref string) int64 {
	return e.scalar(`SELECT expires_at FROM sessions WHERE session_ref = ?`, ref)
}

func (e *env) sessionEnded(ref string) bool {
	return e.scalar(`SELECT count(*) FROM sessions WHERE session_ref = ? AND ended_at IS NOT NULL`, ref) == 1
}

func TestSessionSlide(t *testing.T) {
	idle := room.Defaults().SessionDefault // 8h: the idle window of a default join
	cases := []struct {
		name string
		// restartBefore drops the session cache before each use, so the use
		// goes through the sidecar path of Authenticate instead of memory.
		restartBefore bool
	}{
		{name: "use_from_the_cache_extends_the_expiry"},
		{name: "use_from_the_sidecar_extends_the_expiry", restartBefore: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.joinGrant("agent")
			use := func() error {
				if tc.restartBefore {
					e.restart()
				}
				_, err := e.authenticate(g.SessionToken)
				return err
			}
			if err := use(); err != nil {
				t.Fatal(err)
			}
			// Three uses 7h apart: 21h, far past the 8h a fixed session had.
			for i := range 3 {
				e.clock.Advance(7 * time.Hour)
				if err := use(); err != nil {
					t.Fatalf("use %d, 7h after the last: %v", i+1, err)
				}
				e.sweep() // the sweeper agrees: the session is live
				if e.sessionEnded(g.SessionRef) {
					t.Fatal("the sweeper ended a session used just now")
				}
			}
			lastUse := e.clock.Now()
			if got, want := e.sessionExpiresAt(g.SessionRef), lastUse.Add(idle).UnixMilli(); got != want {
				t.Errorf("expires_at after the flush = %v, want the last use + the idle window %v", time.UnixMilli(got).UTC(), time.UnixMilli(want).UTC())
			}
			e.clock.Advance(idle - time.Millisecond)
			e.sweep()
			if e.sessionEnded(g.SessionRef) {
				t.Fatal("ended a millisecond before its idle window ran out")
			}
			e.clock.Advance(time.Millisecond)
			if _, err := e.authenticate(g.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
				t.Fatalf("idle for the whole window: %v, want session_expired", err)
			}
			mark := e.lastEventID()
			e.sweep()
			if got := types(e.eventsAfter(mark)); len(got) != 1 || got[0] != "session.expired" {
				t.Errorf("the sweep after the idle window wrote %v, want [session.expired]", got)
			}
		})
	}
}

func TestSessionSlide_TheSweeperSeesAnUnflushedUse(t *testing.T) {
	e := newEnv(t)
	g := e.joinGrant("agent")
	e.clock.Advance(7 * time.Hour)
	if _, err := e.authenticate(g.SessionToken); err != nil {
		t.Fatal(err)
	}
	// The row still says 8h: the use is only in memory. The sweeper must
	// not end a session that authentication would still accept.
	if got, want := e.sessionExpiresAt(g.SessionRef), g.ExpiresAt; time.UnixMilli(got).UTC().Format("2006-01-02T15:04:05.000Z") != want {
		t.Fatalf("expires_at moved before any flush: %v, grant said %s", time.UnixMilli(got).UTC(), want)
	}
	e.clock.Advance(2 * time.Hour) // 9h: past the row's expiry, inside the slide
	mark := e.lastEventID()
	e.sweep()
	if e.sessionEnded(g.SessionRef) {
		t.Fatalf("the sweeper ended a session used 2h ago: events %v", types(e.eventsAfter(mark)))
	}
	if _, err := e.authenticate(g.SessionToken); err != nil {
		t.Fatalf("after the sweep: %v", err)
	}
}

func TestSessionSlide_MaxLifetimeCaps(t *testing.T) {
	e := newEnv(t, withLimits(func(l *room.Limits) { l.SessionMaxLifetime = 20 * time.Hour }))
	g := e.joinGrant("agent")
	issued := e.clock.Now()
	for range 2 {
		e.clock.Advance(7 * time.Hour)
		if _, err := e.authenticate(g.SessionToken); err != nil {
			t.Fatal(err)
		}
	}
	e.sweep()
	if got, want := e.sessionExpiresAt(g.SessionRef), issued.Add(20*time.Hour).UnixMilli(); got != want {
		t.Errorf("expires_at = %v, want issued + max lifetime %v (the last use + idle would be later)",
			time.UnixMilli(got).UTC(), time.UnixMilli(want).UTC())
	}
	e.clock.Advance(6 * time.Hour) // 20h: the cap, though used 6h ago
	if _, err := e.authenticate(g.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
		t.Fatalf("at the maximum lifetime: %v, want session_expired", err)
	}
	e.sweep()
	if !e.sessionEnded(g.SessionRef) {
		t.Error("the sweeper left a session past its maximum lifetime")
	}
}

func TestSessionSlide_RestartKeepsTheSlideWithinTheFlush(t *testing.T) {
	idle := room.Defaults().SessionDefault
	t.Run("a_crash_loses_at_most_the_uses_since_the_last_flush", func(t *testing.T) {
		e := newEnv(t)
		g := e.joinGrant("agent")
		e.clock.Advance(7 * time.Hour)
		if _, err := e.authenticate(g.SessionToken); err != nil {
			t.Fatal(err)
		}
		flushed := e.clock.Now()
		e.sweep() // flushes: the slide to 15h is in the sidecar
		e.clock.Advance(30 * time.Second)
		if _, err := e.authenticate(g.SessionToken); err != nil { // in memory only
			t.Fatal(err)
		}
		e.restart() // no graceful stop: nothing flushes
		if got, want := e.sessionExpiresAt(g.SessionRef), flushed.Add(idle).UnixMilli(); got != want {
			t.Errorf("expires_at after the restart = %v, want the flushed slide %v", time.UnixMilli(got).UTC(), time.UnixMilli(want).UTC())
		}
		// Just inside the flushed slide (15h): live, though a fixed session
		// would have ended at 8h.
		e.clock.Advance(idle - 30*time.Second - time.Millisecond)
		e.sweep()
		if e.sessionEnded(g.SessionRef) {
			t.Fatal("the flushed slide was lost across the restart")
		}
		// The use 30s after the flush died with the process: the documented
		// bound (one flush period), not more. Nothing used the session since.
		e.clock.Advance(time.Millisecond)
		if _, err := e.authenticate(g.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
			t.Errorf("at the flushed expiry: %v, want session_expired", err)
		}
	})
	t.Run("a_graceful_stop_keeps_every_use", func(t *testing.T) {
		e := newEnv(t)
		g := e.joinGrant("agent")
		e.clock.Advance(7 * time.Hour)
		if _, err := e.authenticate(g.SessionToken); err != nil {
			t.Fatal(err)
		}
		used := e.clock.Now()
		if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) { return none{}, eng.MarkStopped(tx) }); err != nil {
			t.Fatal(err)
		}
		e.restart()
		if got, want := e.sessionExpiresAt(g.SessionRef), used.Add(idle).UnixMilli(); got != want {
			t.Errorf("expires_at after a graceful stop = %v, want the last use + idle %v", time.UnixMilli(got).UTC(), time.UnixMilli(want).UTC())
		}
		e.clock.Advance(idle - time.Minute)
		if _, err := e.authenticate(g.SessionToken); err != nil {
			t.Fatalf("after a graceful stop and restart: %v", err)
		}
	})
}
