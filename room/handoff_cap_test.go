package room_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// ---- the active-task cap (D33) ----

func TestCap_64ConcurrentCreatesThroughTheActorExactly32Succeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	const n = 64
	// Eight participants try their whole share (8) at once: 64 creates the
	// shares would allow, of which the room's cap of 32 must admit exactly 32.
	share := e.limits.MaxTasksPerParticipant
	creators := []room.Principal{c.owner, c.worker, c.other}
	for i := len(creators); i < n/share; i++ {
		creators = append(creators, e.join(fmt.Sprintf("creator %d", i), agentCaps...))
	}
	start := make(chan struct{})
	errs := make([]error, n)
	results := make([]room.CreateHandoffResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.create(creators[i%len(creators)], room.CreateHandoffInput{Summary: fmt.Sprintf("job %d", i)})
		}()
	}
	close(start)
	wg.Wait()
	var ok, limited int
	var live []room.CreateHandoffResult
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			live = append(live, results[i])
		case room.ErrorKind(err) == room.KindLimitExceeded:
			limited++
			if f := room.AsError(err).Fields; f["scope"] != "room" || f["limit"] != 32 || f["count"] != 32 {
				t.Fatalf("create %d refused with %v, want scope room, limit 32, count 32", i, f)
			}
		default:
			t.Fatalf("create %d: unexpected %v", i, err)
		}
	}
	if ok != 32 || limited != 32 {
		t.Fatalf("%d succeeded and %d hit the cap, want 32 and 32", ok, limited)
	}
	if got := e.scalar(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`); got != 32 {
		t.Fatalf("%d active tasks stored, want 32", got)
	}
	if got := e.scalar(`SELECT count(*) FROM events WHERE event_type = 'handoff.created'`); got != 32 {
		t.Fatalf("%d handoff.created events, want 32 (refused creates write nothing)", got)
	}

	// The host has no share but is held by the room's cap like everyone.
	atCap := func(step string) {
		t.Helper()
		_, err := e.create(e.op(), room.CreateHandoffInput{Summary: "over"})
		if room.ErrorKind(err) != room.KindLimitExceeded || room.AsError(err).Fields["scope"] != "room" {
			t.Fatalf("%s: got %v, want limit_exceeded for the room", step, err)
		}
	}
	freesOne := func(step string) {
		t.Helper()
		if _, err := e.create(e.op(), room.CreateHandoffInput{Summary: "fits"}); err != nil {
			t.Fatalf("%s should free one slot: %v", step, err)
		}
		atCap(step + ", then one more")
	}

	// Accepting and waiting for input do not free a slot.
	byID := map[string]room.Principal{}
	for _, p := range creators {
		byID[p.ParticipantID] = p
	}
	id := live[0].Handoff.HandoffID
	worker := creators[0]
	if worker.ParticipantID == live[0].Handoff.OwnerID {
		worker = creators[1]
	}
	okH(t)(e.accept(worker, id))
	okH(t)(e.requestInput(worker, id, q("a")))
	atCap("accept and request input")
	okH(t)(e.complete(worker, id, room.ResultInput{Text: "done"}))
	freesOne("completing one")

	if err := e.cancel(byID[live[1].Handoff.OwnerID], live[1].Task.TaskID); err != nil {
		t.Fatal(err)
	}
	freesOne("cancelling one")
}

// Tasks past their TTL hold no slot: the create expires them itself when the
// sweeper has not run yet (deterministically in handoff_internal_test.go).
func TestCap_ExpiredTasksFreeTheirSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	for range 32 {
		mustCreate(t, e, e.op(), room.CreateHandoffInput{Summary: "old"}) // the host: no share
	}
	e.clock.Advance(e.limits.TaskTTL)
	res, err := e.create(c.owner, room.CreateHandoffInput{Summary: "new"})
	if err != nil {
		t.Fatalf("expired tasks still hold the cap: %v", err)
	}
	if got := e.scalar(`SELECT count(*) FROM tasks WHERE status = 'failed'`); got != 32 {
		t.Fatalf("%d tasks failed, want 32", got)
	}
	if res.Task.Status != room.TaskWorking {
		t.Fatalf("new task %s", res.Task.Status)
	}
}

// ---- size limits (D8) ----

// textOf returns a string of exactly n code points, mostly multi-byte, so
// the limits are shown to count code points and not bytes.
func textOf(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteRune([]rune("é中😀a")[i%4])
	}
	return b.String()
}

// resultOfSize returns a result whose JSON encoding is exactly n bytes.
func resultOfSize(t *testing.T, n int) room.ResultInput {
	t.Helper()
	r := room.ResultInput{Artifacts: []room.Artifact{}}
	base := len(mustJSON(t, r))
	fill := n - base
	r.Text = strings.Repeat("é", fill/2) + strings.Repeat("a", fill%2)
	if got := len(mustJSON(t, r)); got != n {
		t.Fatalf("built a %d-byte result, want %d", got, n)
	}
	return r
}

func TestLimits_TextSizesCountCodePoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	cases := []struct {
		name  string
		in    room.CreateHandoffInput
		ok    bool
		field string
	}{
		{"summary_2000_code_points_accepted", room.CreateHandoffInput{Summary: textOf(2000)}, true, ""},
		{"summary_2001_code_points_refused", room.CreateHandoffInput{Summary: textOf(2001)}, false, "summary"},
		{"constraints_8000_code_points_accepted", room.CreateHandoffInput{Summary: "s", Constraints: textOf(8000)}, true, ""},
		{"constraints_8001_code_points_refused", room.CreateHandoffInput{Summary: "s", Constraints: textOf(8001)}, false, "constraints"},
		{"32_artifacts_accepted", room.CreateHandoffInput{Summary: "s", Artifacts: artifacts(32, "u")}, true, ""},
		{"33_artifacts_refused", room.CreateHandoffInput{Summary: "s", Artifacts: artifacts(33, "u")}, false, "artifacts"},
		{"uri_2048_accepted", room.CreateHandoffInput{Summary: "s", Artifacts: artifacts(1, textOf(2048))}, true, ""},
		{"uri_2049_refused", room.CreateHandoffInput{Summary: "s", Artifacts: artifacts(1, textOf(2049))}, false, "artifacts[0].uri"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, events := e.stateDump(), e.lastEventID()
			res, err := e.create(c.owner, tc.in)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if res.Handoff.Summary != tc.in.Summary || strOf(res.Handoff.Constraints) != orNil(tc.in.Constraints) ||
					len(res.Handoff.Artifacts) != len(tc.in.Artifacts) {
					t.Fatal("stored input differs from what was sent")
				}
				// Free the slot again so the cases do not interfere.
				if err := e.cancel(c.owner, res.Task.TaskID); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, room.KindLimitExceeded)
			if f := room.AsError(err).Fields["field"]; f != tc.field {
				t.Errorf("field = %v, want %s", f, tc.field)
			}
			if e.stateDump() != before || e.lastEventID() != events {
				t.Fatal("a refused create changed the room")
			}
		})
	}
}

func orNil(s string) string {
	if s == "" {
		return "<nil>"
	}
	return s
}

func artifacts(n int, uri string) []room.Artifact {
	out := make([]room.Artifact, n)
	for i := range out {
		out[i] = room.Artifact{URI: uri, Title: fmt.Sprint(i)}
	}
	return out
}

func TestLimits_ResultSize(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	id := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "s"}).Handoff.HandoffID
	okH(t)(e.accept(c.worker, id))
	refuse := func(name string, r room.ResultInput, status string, kind room.Kind) {
		t.Run(name, func(t *testing.T) {
			before, events := e.stateDump(), e.lastEventID()
			_, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
				return eng.CompleteHandoff(tx, c.worker, room.CompleteInput{HandoffID: id, Result: r, StatusMessage: status})
			})
			wantKind(t, err, kind)
			if e.stateDump() != before || e.lastEventID() != events {
				t.Fatal("a refused completion changed the room")
			}
		})
	}
	refuse("262145_bytes_refused", resultOfSize(t, 262145), "", room.KindLimitExceeded)
	refuse("33_result_artifacts_refused", room.ResultInput{Text: "t", Artifacts: artifacts(33, "u")}, "", room.KindLimitExceeded)
	refuse("2049_code_point_result_uri_refused", room.ResultInput{Text: "t", Artifacts: artifacts(1, textOf(2049))}, "", room.KindLimitExceeded)
	refuse("empty_result_refused", room.ResultInput{}, "", room.KindInvalidRequest)
	refuse("2001_code_point_status_message_refused", room.ResultInput{Text: "t"}, textOf(2001), room.KindLimitExceeded)
	t.Run("262144_bytes_accepted_and_kept_whole", func(t *testing.T) {
		r := resultOfSize(t, 262144)
		h := okH(t)(e.complete(c.worker, id, r))
		if h.Result == nil || h.Result.Text != r.Text {
			t.Fatal("the stored result differs from the one sent")
		}
		task := mustTask(t, e, c.owner, h.TaskID)
		var tool struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(task.Result, &tool); err != nil || tool.Content[0].Text != r.Text {
			t.Fatalf("task result: %v", err)
		}
	})
	t.Run("2001_code_point_note_refused", func(t *testing.T) {
		_, err := e.approve(c.approver, id, textOf(2001))
		wantKind(t, err, room.KindLimitExceeded)
	})
}
