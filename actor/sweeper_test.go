package actor

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/commonroom/ce/room"
)

// TestSweeper_ArmsForTheNextDueTime runs in a synctest bubble: time is fake
// and advances only when every goroutine is blocked, so the test proves the
// writer sleeps until the next expiry instead of polling, without sleeping.
func TestSweeper_ArmsForTheNextDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := openRoom(t, func(c *Config) { c.MaxSweepWait = 6 * time.Hour })
		ctx := context.Background()
		ten := 10
		g, err := Do(ctx, tr.Room, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
			return tr.Engine().CreateInvite(tx, room.Operator(tr.Engine().HostID), room.InviteInput{ExpiresInMinutes: &ten})
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		due := time.Now().Add(10 * time.Minute)
		if got := tr.NextWake(); got.Before(due) || got.After(due.Add(time.Second)) {
			t.Fatalf("sweeper armed for %v, want the invitation's expiry %v", got, due)
		}
		sweeps := tr.Stats().Sweeps.Load()

		time.Sleep(9 * time.Minute)
		synctest.Wait()
		if n := tr.Stats().Sweeps.Load() - sweeps; n != 0 {
			t.Fatalf("%d sweeps before anything was due: the sweeper polls", n)
		}
		if n := count(t, tr, `SELECT count(*) FROM events WHERE event_type = 'invite.expired'`); n != 0 {
			t.Fatalf("invite.expired recorded early")
		}

		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if n := tr.Stats().Sweeps.Load() - sweeps; n != 1 {
			t.Fatalf("%d sweeps at the due time, want exactly 1", n)
		}
		if n := count(t, tr, `SELECT count(*) FROM events WHERE event_type = 'invite.expired' AND json_extract(payload_json, '$.invite_id') = ?`, g.InviteID); n != 1 {
			t.Fatalf("invite.expired rows = %d, want 1", n)
		}
		// Nothing else is due: the sweeper waits the full cap.
		if got, want := tr.NextWake(), time.Now().Add(6*time.Hour); got.Before(want.Add(-time.Second)) || got.After(want.Add(time.Second)) {
			t.Fatalf("idle sweeper armed for %v, want the cap %v", got, want)
		}
		tr.Close(ctx)
		tr.store.Close()
	})
}

// TestSweeper_ExpiresSessionsWithEvents checks the session rule with a fake
// clock: a session past its expiry is ended by the sweeper, with an event,
// and its streams are told to end.
func TestSweeper_ExpiresSessionsWithEvents(t *testing.T) {
	clock := newFakeClock()
	tr := openRoom(t, func(c *Config) { c.Engine.Clock = clock.Now })
	ctx := context.Background()
	s, _ := join(t, tr)
	clock.Advance(8*time.Hour - time.Second)
	if err := tr.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, tr, `SELECT count(*) FROM sessions WHERE ended_at IS NULL AND session_ref = ?`, s.SessionRef); n != 1 {
		t.Fatal("a session inside its lifetime was ended")
	}
	clock.Advance(time.Second)
	if err := tr.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	barrier(t, tr.Room)
	if n := count(t, tr, `SELECT count(*) FROM sessions WHERE end_reason = 'expired' AND session_ref = ?`, s.SessionRef); n != 1 {
		t.Fatal("the expired session was not ended")
	}
	if n := count(t, tr, `SELECT count(*) FROM events WHERE event_type = 'session.expired' AND json_extract(payload_json, '$.session_ref') = ?`, s.SessionRef); n != 1 {
		t.Fatal("no session.expired event")
	}
	ended := false
	tr.pub.mu.Lock()
	for _, b := range tr.pub.batches {
		for _, ref := range b.EndSessions {
			ended = ended || ref == s.SessionRef
		}
	}
	tr.pub.mu.Unlock()
	if !ended {
		t.Fatal("the expired session's live streams were not told to end")
	}
	// The session token is now refused as expired.
	if _, err := Read(ctx, tr.Room, func(q room.Querier) (room.Principal, error) {
		return tr.Engine().Authenticate(ctx, q, s.SessionToken)
	}); room.ErrorKind(err) != room.KindSessionExpired {
		t.Fatalf("token after expiry: %v, want session_expired", err)
	}
}

// TestAuthenticate_CacheNeverOutlivesTheSession authenticates first (which
// caches the session), then ends it by leaving and by expiry: the cache must
// follow the sidecar, not keep the old answer.
func TestAuthenticate_CacheNeverOutlivesTheSession(t *testing.T) {
	clock := newFakeClock()
	tr := openRoom(t, func(c *Config) { c.Engine.Clock = clock.Now })
	ctx := context.Background()
	newSession := func() room.SessionGrant {
		s, _ := join(t, tr)
		return s
	}
	auth := func(token string) (room.Principal, error) {
		return Read(ctx, tr.Room, func(q room.Querier) (room.Principal, error) {
			return tr.Engine().Authenticate(ctx, q, token)
		})
	}

	left := newSession()
	p, err := auth(left.SessionToken)
	if err != nil || p.SessionRef != left.SessionRef {
		t.Fatalf("first authentication: %v %v", p, err)
	}
	if _, err := Do(ctx, tr.Room, "leave", func(tx *room.Tx) (struct{}, error) {
		_, err := tr.Engine().Leave(tx, p, room.Empty{})
		return struct{}{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(left.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
		t.Fatalf("after leaving: %v, want unauthorized", err)
	}

	expiring := newSession()
	if _, err := auth(expiring.SessionToken); err != nil {
		t.Fatal(err)
	}
	clock.Advance(8 * time.Hour)
	if _, err := auth(expiring.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
		t.Fatalf("past expiry, before the sweep: %v, want session_expired", err)
	}
	if err := tr.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(expiring.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
		t.Fatalf("after the sweep: %v, want session_expired", err)
	}
}
