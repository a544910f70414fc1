package room_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// fillShare sets what p's actions made the room store today to used bytes.
func fillShare(e *env, p room.Principal, used int64) {
	e.tb.Helper()
	day := e.eng.Now().UnixMilli() / (24 * 3600 * 1000)
	e.rawSQL(`INSERT INTO storage_usage(participant_id, day, bytes) VALUES (?, ?, ?)
		ON CONFLICT(participant_id) DO UPDATE SET day = excluded.day, bytes = excluded.bytes`, p.ParticipantID, day, used)
}

// wantShareRefusal checks the refusal names the scope, the limit and when
// the share frees (the next UTC midnight after now).
func wantShareRefusal(t *testing.T, e *env, err error) {
	t.Helper()
	wantKind(t, err, room.KindLimitExceeded)
	re := room.AsError(err)
	now := e.eng.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if re.Fields["scope"] != room.ScopeStorage || re.Fields["frees_at"] != room.WireTime(midnight.UnixMilli()) ||
		re.Fields["limit"] != e.eng.Limits.MaxStoredBytesPerDay {
		t.Fatalf("refusal fields %v, want scope %s, frees_at %s, limit %d", re.Fields, room.ScopeStorage,
			room.WireTime(midnight.UnixMilli()), e.eng.Limits.MaxStoredBytesPerDay)
	}
	if !strings.Contains(re.Message, "frees at "+room.WireTime(midnight.UnixMilli())) || !strings.Contains(re.Message, "share") {
		t.Fatalf("message %q does not say the share and when it frees", re.Message)
	}
}

func TestStorageShare_FloodOfHandoffsIsRefusedUntilUTCMidnight(t *testing.T) {
	e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxStoredBytesPerDay = 10_000 }))
	c := newCast(e)
	summary := strings.Repeat("x", 2000) // each create counts 2000 + 1024 bytes
	made := 0
	var refused error
	for i := 0; i < 10; i++ {
		res, err := e.create(c.owner, room.CreateHandoffInput{Summary: summary})
		if err != nil {
			refused = err
			break
		}
		made++
		if err := e.cancel(c.owner, res.Task.TaskID); err != nil {
			t.Fatal(err)
		}
	}
	if made != 3 {
		t.Fatalf("made %d handoffs before the refusal, want 3 (3 × 3024 bytes of a 10000-byte share)", made)
	}
	wantShareRefusal(t, e, refused)
	if n := e.scalar(`SELECT count(*) FROM handoffs`); n != 3 {
		t.Fatalf("%d handoffs stored, want 3: the refused create wrote nothing", n)
	}
	// Another participant has a share of its own; the host has none.
	if _, err := e.create(c.other, room.CreateHandoffInput{Summary: summary}); err != nil {
		t.Fatalf("another participant was refused: %v", err)
	}
	for i := 0; i < 5; i++ {
		if _, err := e.create(e.op(), room.CreateHandoffInput{Summary: summary}); err != nil {
			t.Fatalf("the host was refused: %v", err)
		}
		if n := e.scalar(`SELECT count(*) FROM storage_usage WHERE participant_id = ?`, e.eng.HostID); n != 0 {
			t.Fatal("the host's actions were counted")
		}
	}
	// The share survives a restart and frees at the next UTC midnight.
	e.restart()
	_, err := e.create(c.owner, room.CreateHandoffInput{Summary: summary})
	wantShareRefusal(t, e, err)
	now := e.eng.Now().UTC()
	e.clock.Advance(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now))
	if _, err := e.create(c.owner, room.CreateHandoffInput{Summary: summary}); err != nil {
		t.Fatalf("after UTC midnight: %v", err)
	}
}

func TestStorageShare_EveryStoringActionCountsAndIsRefusedAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	cases := []struct {
		name  string
		setup func(t *testing.T, d docRoom, c cast) (actor room.Principal, act func() error, count string)
	}{
		{"create refused", func(t *testing.T, d docRoom, c cast) (room.Principal, func() error, string) {
			return c.owner, func() error { _, err := d.create(c.owner, room.CreateHandoffInput{Summary: "s"}); return err },
				`SELECT count(*) FROM handoffs`
		}},
		{"result refused", func(t *testing.T, d docRoom, c cast) (room.Principal, func() error, string) {
			res := mustCreate(t, d.env, c.owner, room.CreateHandoffInput{Summary: "s", Assignee: c.worker.ParticipantID})
			okH(t)(d.accept(c.worker, res.Handoff.HandoffID))
			return c.worker, func() error {
					_, err := d.complete(c.worker, res.Handoff.HandoffID, room.ResultInput{Text: "done"})
					return err
				},
				`SELECT count(*) FROM handoffs WHERE result_json IS NOT NULL`
		}},
		{"input request refused", func(t *testing.T, d docRoom, c cast) (room.Principal, func() error, string) {
			res := mustCreate(t, d.env, c.owner, room.CreateHandoffInput{Summary: "s", Assignee: c.worker.ParticipantID})
			okH(t)(d.accept(c.worker, res.Handoff.HandoffID))
			return c.worker, func() error { _, err := d.requestInput(c.worker, res.Handoff.HandoffID, q("k1")); return err },
				`SELECT count(*) FROM task_inputs`
		}},
		{"input answer refused", func(t *testing.T, d docRoom, c cast) (room.Principal, func() error, string) {
			res := mustCreate(t, d.env, c.owner, room.CreateHandoffInput{Summary: "s", Assignee: c.worker.ParticipantID})
			okH(t)(d.accept(c.worker, res.Handoff.HandoffID))
			okH(t)(d.requestInput(c.worker, res.Handoff.HandoffID, q("k1")))
			return c.owner, func() error {
					return d.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"k1": answerOf("yes")})
				},
				`SELECT count(*) FROM task_inputs WHERE response_json IS NOT NULL`
		}},
		{"proposal refused", func(t *testing.T, d docRoom, c cast) (room.Principal, func() error, string) {
			return c.owner, func() error {
					_, err := d.propose(c.owner, room.ProposeInput{Target: "workspace", BaseVersion: d.version(), Summary: "edit",
						Change: room.ChangeInput{Content: refOf("new text\n")}})
					return err
				},
				`SELECT count(*) FROM proposals`
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDocRoom(t, withLimits(func(l *room.Limits) { l.MaxStoredBytesPerDay = limit }))
			c := newCast(d.env)
			who, act, count := tc.setup(t, d, c)
			before := d.scalar(count)
			fillShare(d.env, who, limit-room.StoredRecordOverhead) // the overhead alone no longer fits
			err := act()
			wantShareRefusal(t, d.env, err)
			if got := d.scalar(count); got != before {
				t.Fatalf("the refused action changed %q from %d to %d", count, before, got)
			}
			// With room in the share the same action succeeds and is counted.
			fillShare(d.env, who, 0)
			if err := act(); err != nil {
				t.Fatalf("with room in the share: %v", err)
			}
			used, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (int64, error) { return eng.StorageUsed(tx, who.ParticipantID) })
			if err != nil || used <= room.StoredRecordOverhead {
				t.Fatalf("counted %d bytes (%v), want more than the overhead", used, err)
			}
		})
	}
}

func TestStorageShare_ReplayedCreateIsNotCountedAgain(t *testing.T) {
	e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxStoredBytesPerDay = 4000 }))
	c := newCast(e)
	in := room.CreateHandoffInput{Summary: strings.Repeat("y", 2000), IdempotencyKey: "k"}
	mustCreate(t, e, c.owner, in)
	for i := 0; i < 3; i++ {
		res, err := e.create(c.owner, in)
		if err != nil || !res.Replayed {
			t.Fatalf("replay %d: %v (replayed %v)", i, err, res.Replayed)
		}
	}
	used, _ := do(e, func(eng *room.Engine, tx *room.Tx) (int64, error) { return eng.StorageUsed(tx, c.owner.ParticipantID) })
	if used != 2000+room.StoredRecordOverhead {
		t.Fatalf("used %d, want one create's %d", used, 2000+room.StoredRecordOverhead)
	}
	_ = context.Background()
}
