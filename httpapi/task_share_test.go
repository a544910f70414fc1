package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// Issue 13 item 10: one participant may hold only its share of the room's
// active tasks, and an admin clears a participant's live handoffs in one
// request. These tests go through the real listeners.

// wantShareRefusal checks a limit_exceeded body: which cap, its limit, the count.
func wantShareRefusal(t *testing.T, body map[string]any, scope string, limit, count int) {
	t.Helper()
	if body["error"] != "limit_exceeded" || body["scope"] != scope || body["limit"] != float64(limit) || body["count"] != float64(count) {
		t.Fatalf("refusal %v, want limit_exceeded scope %s limit %d count %d", body, scope, limit, count)
	}
	if _, has := body["retry_after_seconds"]; has {
		t.Fatalf("the task caps promise no retry time: %v", body)
	}
}

func TestTaskShare_HTTPAndMCPRefuseTheNinthForOneParticipantOnly(t *testing.T) {
	h := newHarness(t, "")
	flooder := h.join("flooder", "read", "propose")
	other := h.join("other", "read", "propose")
	share := h.Eng.Limits.MaxTasksPerParticipant
	create := func(token, summary, key string) apiResp {
		body := map[string]any{"summary": summary}
		if key != "" {
			body["idempotency_key"] = key
		}
		return h.do("POST", h.IngressURL("/workspace/handoff"), token, body)
	}
	first := create(flooder.SessionToken, "keyed", "retry-me")
	wantOK(t, first)
	for i := 1; i < share; i++ {
		wantOK(t, create(flooder.SessionToken, "flood", ""))
	}

	t.Run("HTTP: the ninth is 429 limit_exceeded with scope participant and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		body := wantError(t, create(flooder.SessionToken, "one too many", ""), http.StatusTooManyRequests, "limit_exceeded")
		wantShareRefusal(t, body, "participant", share, share)
		if body["room_limit"] != float64(32) {
			t.Fatalf("room_limit %v, want 32", body["room_limit"])
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("MCP: the ninth is isError limit_exceeded with scope participant", func(t *testing.T) {
		before := h.Snapshot()
		for _, tasks := range []bool{false, true} {
			res := newMCPClient(h, flooder.SessionToken,
				tasks).ok(t, "tools/call", map[string]any{"name": "handoff_create",
				"arguments": map[string]any{"summary": "one too many"}})

			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true {
				t.Fatalf("tasks=%v: created over the share: %v", tasks, res)
			}
			wantShareRefusal(t, sc, "participant", share, share)
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("an idempotent retry at the share is answered with the original", func(t *testing.T) {
		again := create(flooder.SessionToken, "keyed", "retry-me")
		wantOK(t, again)
		a, b := first.JSON(t), again.JSON(t)
		if jsonAt(a, "handoff", "handoff_id") != jsonAt(b, "handoff", "handoff_id") || b["replayed"] != true {
			t.Fatalf("retry answered %s, want the original %s", again.Body, first.Body)
		}
	})
	t.Run("another participant and the host still create", func(t *testing.T) {
		wantOK(t, create(other.SessionToken, "mine", ""))
		for range share + 1 { // the operator acts as the host, who has no share
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/handoff"), h.OpToken, map[string]any{"summary": "host work"}))
		}
	})
	t.Run("the room's cap of 32 still holds: then the host is refused with scope room", func(t *testing.T) {
		for i := 0; h.Count(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`) < 32; i++ {
			if i > 40 {
				t.Fatal("the active-task count does not grow")
			}
			p := h.join("filler", "read", "propose")
			for range share {
				if h.Count(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`) < 32 {
					wantOK(t, create(p.SessionToken, "filler", ""))
				}
			}
		}
		late := h.join("late", "read", "propose")
		before := h.Snapshot()
		body := wantError(t, h.do("POST", h.OwnerURL("/workspace/handoff"), h.OpToken, map[string]any{"summary": "over"}),
			http.StatusTooManyRequests, "limit_exceeded")
		wantShareRefusal(t, body, "room", 32, 32)
		wantShareRefusal(t, wantError(t, create(late.SessionToken, "over", ""), http.StatusTooManyRequests, "limit_exceeded"), "room", 32, 32)
		h.AssertUnchanged(t, before)
	})
}

func TestCancelParticipantHandoffs_Route(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	flooder := h.join("flooder", "read", "propose")
	worker := h.join("worker", "read", "checkout")
	other := h.join("other", "read", "propose")
	moderator := h.join("moderator", "admin")
	open := h.newTask(t, flooder.SessionToken, "open")
	accepted := h.newTask(t, flooder.SessionToken, "accepted")
	asking := h.newTask(t, flooder.SessionToken, "asking")
	done := h.newTask(t, flooder.SessionToken, "done")
	theirs := h.newTask(t, other.SessionToken, "someone else's")
	for _, x := range []taskRef{accepted, asking, done} {
		h.acceptTask(t, worker.SessionToken, x)
	}
	h.askInput(t, worker.SessionToken, asking, "q", "which one?")
	h.completeTask(t, worker.SessionToken, done, "finished")
	live := []taskRef{open, accepted, asking}
	route := "/workspace/participant/cancel_handoffs"

	// The flooder follows its tasks live; the other participant its own.
	ids := []string{open.TaskID, accepted.TaskID, asking.TaskID, done.TaskID}
	sf, ack := h.Listen(t, c, flooder.SessionToken, "9", map[string]any{"taskIds": ids}, true)
	if got := decodeStrings(t, ack["taskIds"]); !sameSet(got, ids) {
		t.Fatalf("acknowledged %v, want %v", got, ids)
	}
	so, _ := h.Listen(t, c, other.SessionToken, "10", map[string]any{"taskIds": []string{theirs.TaskID}}, true)

	t.Run("non-admins are refused with required admin and nothing changes", func(t *testing.T) {
		before := h.Snapshot()
		for _, tok := range []string{flooder.SessionToken, worker.SessionToken, other.SessionToken} {
			body := wantError(t, h.do("POST", h.IngressURL(route), tok, map[string]any{"participant_id": flooder.ParticipantID}),
				http.StatusForbidden, "permission_denied")
			if body["required"] != "admin" {
				t.Fatalf("required = %v, want admin", body["required"])
			}
		}
		wantError(t, h.do("POST", h.IngressURL(route), "", map[string]any{"participant_id": flooder.ParticipantID}),
			http.StatusUnauthorized, "unauthorized")
		h.AssertUnchanged(t, before)
	})
	t.Run("bad input gets a clear error and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		huge := strings.Repeat("p", 200<<10)
		for _, tc := range []struct {
			name   string
			body   any
			status int
			code   string
		}{
			{"malformed JSON", "{", http.StatusBadRequest, "invalid_request"},
			{"not an object", []any{flooder.ParticipantID}, http.StatusBadRequest, "invalid_request"},
			{"a number for the id", map[string]any{"participant_id": 5}, http.StatusBadRequest, "invalid_request"},
			{"no id", map[string]any{}, http.StatusBadRequest, "invalid_request"},
			{"an oversized id, not echoed", map[string]any{"participant_id": huge}, http.StatusBadRequest, "invalid_request"},
			{"an unknown participant", map[string]any{"participant_id": "participant_0000000000000000"}, http.StatusNotFound, "not_found"},
		} {
			r := h.do("POST", h.IngressURL(route), moderator.SessionToken, tc.body)
			body := wantError(t, r, tc.status, tc.code)
			if len(r.Body) > 1024 {
				t.Errorf("%s: a %d-byte answer echoes the input", tc.name, len(r.Body))
			}
			if tc.code == "not_found" && body["participant_id"] != "participant_0000000000000000" {
				t.Errorf("%s: %v does not name the participant", tc.name, body)
			}
		}
		h.AssertUnchanged(t, before)
	})

	var cleared struct {
		ParticipantID string   `json:"participant_id"`
		Cancelled     int      `json:"cancelled"`
		HandoffIDs    []string `json:"handoff_ids"`
	}
	t.Run("an admin session clears exactly that participant's live handoffs", func(t *testing.T) {
		events := len(h.Events(""))
		r := h.do("POST", h.IngressURL(route), moderator.SessionToken, map[string]any{"participant_id": flooder.ParticipantID})
		wantOK(t, r)
		r.Into(t, &cleared)
		want := []string{open.HandoffID, accepted.HandoffID, asking.HandoffID}
		if cleared.Cancelled != 3 || cleared.ParticipantID != flooder.ParticipantID || !slices.Equal(cleared.HandoffIDs, want) {
			t.Fatalf("answer %s, want the 3 live handoffs %v", r.Body, want)
		}
		for _, x := range live {
			if st, _ := h.TaskRow(t, x.TaskID); st != room.TaskCancelled || h.Status(t, "handoff", x.HandoffID) != room.HandoffCancelled {
				t.Fatalf("%s: task %s handoff %s, want both cancelled", x.HandoffID, st, h.Status(t, "handoff", x.HandoffID))
			}
		}
		if st, _ := h.TaskRow(t, done.TaskID); st != room.TaskCompleted || h.Status(t, "handoff", done.HandoffID) != room.HandoffResultReady {
			t.Fatal("the result waiting for a decision was touched")
		}
		if st, _ := h.TaskRow(t, theirs.TaskID); st != room.TaskWorking || h.Status(t, "handoff", theirs.HandoffID) != room.HandoffOpen {
			t.Fatal("someone else's handoff was touched")
		}
		var got []string
		for _, ev := range h.Events("")[events:] {
			if ev.Actor == nil || *ev.Actor != moderator.ParticipantID || ev.Payload["reason"] != "requested" {
				t.Fatalf("event %s %s: want actor %s, reason requested", ev.Type, ev.Raw, moderator.ParticipantID)
			}
			got = append(got, ev.Type+" "+ev.Payload["handoff_id"].(string))
		}
		var wantEv []string
		for _, id := range want {
			wantEv = append(wantEv, "task.cancelled "+id, "handoff.cancelled "+id)
		}
		if !slices.Equal(got, wantEv) {
			t.Fatalf("events %v, want %v", got, wantEv)
		}
	})
	t.Run("the live listen stream gets notifications/tasks for each, as tasks/get says", func(t *testing.T) {
		for _, x := range live {
			f := sf.ExpectTask(t, x.TaskID, room.TaskCancelled)
			sameTask(t, f, h.getTask(t, flooder.SessionToken, x))
		}
		// The other participant's stream got nothing: the next frame it
		// sees is about its own task, changed after the clear.
		h.cancelTask(t, other.SessionToken, theirs)
		so.ExpectTask(t, theirs.TaskID, room.TaskCancelled)
	})
	t.Run("the share is free again, and the operator clears it on the owner listener", func(t *testing.T) {
		share := h.Eng.Limits.MaxTasksPerParticipant
		for range share {
			h.newTask(t, flooder.SessionToken, "again")
		}
		r := h.do("POST", h.OwnerURL(route), h.OpToken, map[string]any{"participant_id": flooder.ParticipantID})
		wantOK(t, r)
		if n := r.JSON(t)["cancelled"]; n != float64(share) {
			t.Fatalf("the operator's clear cancelled %v, want %d", n, share)
		}
		r = h.do("POST", h.OwnerURL(route), h.OpToken, map[string]any{"participant_id": flooder.ParticipantID})
		wantOK(t, r)
		if b := r.JSON(t); b["cancelled"] != float64(0) || len(b["handoff_ids"].([]any)) != 0 {
			t.Fatalf("a clear with nothing live: %s", r.Body)
		}
	})
}
