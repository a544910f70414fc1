package httpapi

// The plain door's refusals for handoffs and tasks, one scenario each
// (roomtest.Scenarios): a fresh room per case, the parties below, and on
// every refusal the check that no row changed.

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
)

// handoffParties are the parties every handoff scenario has.
var handoffParties = []roomtest.PartySpec{
	{Name: "owner", Caps: []string{"read", "propose"}},
	{Name: "worker", Caps: []string{"read", "checkout"}},
	{Name: "worker2", Caps: []string{"read", "checkout"}},
	{Name: "approver", Caps: []string{"read", "approve"}},
	{Name: "outsider", Caps: []string{"read", "propose"}},
}

// openScenarioRoom is a default harness for a scenario table, on tmpfs where there
// is one: each case's room is thrown away, and its commits' fsyncs, not the
// door, would dominate the run.
func openScenarioRoom(t testing.TB) *roomtest.Harness {
	return newHarness(t, "", harnessOpts{InMemory: true}).Harness
}

// beforeCall sends a plain request as a scenario's party and requires a 2xx
// answer: how Before hooks make the records a case works on.
func beforeCall(t testing.TB, s *roomtest.Setup, as, method, path string, body any) map[string]any {
	t.Helper()
	r := s.H.Do(t, method, s.H.IngressURL(path), s.Token(t, as), body)
	if r.Status/100 != 2 {
		t.Fatalf("before the case: %s %s as %s = %d %s", method, path, as, r.Status, r.Body)
	}
	return r.JSON(t)
}

// handoffAt brings a handoff the owner creates to a stage: "open",
// "accepted" (by worker), "asked" (key k), "result_ready", "approved". It
// sets Vars handoff and task.
func handoffAt(stage string, extra map[string]any) func(t testing.TB, s *roomtest.Setup) {
	return func(t testing.TB, s *roomtest.Setup) {
		t.Helper()
		body := map[string]any{"summary": "write the goals"}
		for k, v := range extra {
			body[k] = v
		}
		res := beforeCall(t, s, "owner", "POST", "/workspace/handoff", body)
		hid, _ := jsonAt(res, "handoff", "handoff_id").(string)
		s.Vars["handoff"] = hid
		s.Vars["task"], _ = jsonAt(res, "task", "taskId").(string)
		steps := map[string][]func(){
			"accepted": {func() {
				beforeCall(t, s, "worker", "POST", "/workspace/handoff/accept", map[string]any{"handoff_id": hid})
			}},
			"asked": {func() {
				beforeCall(t, s, "worker", "POST", "/workspace/handoff/request_input", map[string]any{"handoff_id": hid,
					"requests": []any{map[string]any{"key": "k", "message": "which?"}}})
			}},
			"result_ready": {func() {
				beforeCall(t, s, "worker", "POST", "/workspace/handoff/complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "done"}})
			}},
			"approved": {func() {
				beforeCall(t, s, "approver", "POST", "/workspace/handoff/approve", map[string]any{"handoff_id": hid})
			}},
		}
		order := map[string][]string{"open": nil, "accepted": {"accepted"}, "asked": {"accepted", "asked"},
			"result_ready": {"accepted", "result_ready"}, "approved": {"accepted", "result_ready", "approved"}}
		path, ok := order[stage]
		if !ok {
			t.Fatalf("no handoff stage %q", stage)
		}
		for _, st := range path {
			for _, f := range steps[st] {
				f()
			}
		}
	}
}

// withHandoff is a body holding the handoff Before made, and more.
func withHandoff(more map[string]any) func(s *roomtest.Setup) any {
	return withVar("handoff_id", "handoff", more)
}

// withTask is a body holding the task Before made, and more.
func withTask(more map[string]any) func(s *roomtest.Setup) any {
	return withVar("task_id", "task", more)
}

// withVar is a body holding field set to the id Before saved as name, and
// more.
func withVar(field, name string, more map[string]any) func(s *roomtest.Setup) any {
	return func(s *roomtest.Setup) any {
		out := map[string]any{field: s.Vars[name]}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
}

// sameAsUnknown is an After check: the refusal of a foreign record equals
// the refusal of an unknown id at the same route (D2: nothing tells them
// apart but the id it echoes, field idField).
func sameAsUnknown(method, path, asParty, idField, unknown string, more map[string]any) func(t testing.TB, s *roomtest.Setup, raw []byte) {
	return func(t testing.TB, s *roomtest.Setup, raw []byte) {
		t.Helper()
		body := map[string]any{idField: unknown}
		for k, v := range more {
			body[k] = v
		}
		target := s.H.IngressURL(path)
		var r roomtest.Response
		if method == "GET" {
			r = s.H.Do(t, method, target+"?"+idField+"="+url.QueryEscape(unknown), s.Token(t, asParty), nil)
		} else {
			r = s.H.Do(t, method, target, s.Token(t, asParty), body)
		}
		ub := roomtest.WantError(t, r, http.StatusNotFound, rawJSON(t, raw)["error"].(string))
		fb := rawJSON(t, raw)
		if fb[idField] == nil || ub[idField] != unknown {
			t.Errorf("%s recovery fields: foreign %v, unknown %v", idField, fb[idField], ub[idField])
		}
		delete(fb, idField)
		delete(ub, idField)
		if !reflect.DeepEqual(fb, ub) {
			t.Errorf("foreign %v\nunknown %v\nwant the same answer", fb, ub)
		}
	}
}

// rawJSON decodes an answer a scenario's After hook is given.
func rawJSON(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	return roomtest.Response{Body: raw}.JSON(t)
}

// fieldIs is an After check that the refusal names the field.
func fieldIs(name string) func(t testing.TB, s *roomtest.Setup, raw []byte) {
	return func(t testing.TB, s *roomtest.Setup, raw []byte) {
		t.Helper()
		if f := rawJSON(t, raw)["field"]; f != name {
			t.Errorf("field = %v, want %s", f, name)
		}
	}
}

const (
	unknownTask    = "task_ffffffffffffffffffffffffffffffff"
	unknownHandoff = "handoff_ffffffffffffffff"
)

func TestHandoffRoutesRefuse(t *testing.T) {
	answer := map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}
	cases := []roomtest.Scenario{
		// ---- state conflicts ----
		{Name: "accepting an accepted handoff again is 409 handoff_conflict with its state",
			Before: handoffAt("accepted", nil), Route: "POST /workspace/handoff/accept", As: "worker", Args: withHandoff(nil),
			Status: http.StatusConflict, Error: "handoff_conflict", Contains: []string{`"status":"accepted"`},
			After: func(t testing.TB, s *roomtest.Setup, raw []byte) {
				if got := rawJSON(t, raw)["handoff_id"]; got != s.Vars["handoff"] {
					t.Errorf("handoff_id = %v, want %s", got, s.Vars["handoff"])
				}
			}},
		{Name: "another worker accepting a taken handoff is 409 handoff_conflict",
			Before: handoffAt("accepted", nil), Route: "POST /workspace/handoff/accept", As: "worker2", Args: withHandoff(nil),
			Status: http.StatusConflict, Error: "handoff_conflict"},
		{Name: "approving an approved handoff is 409 handoff_conflict",
			Before: handoffAt("approved", nil), Route: "POST /workspace/handoff/approve", As: "approver", Args: withHandoff(nil),
			Status: http.StatusConflict, Error: "handoff_conflict"},
		{Name: "a handoff addressed to another is 404 handoff_not_found to the one accepting it",
			Before: func(t testing.TB, s *roomtest.Setup) {
				handoffAt("open", map[string]any{"assignee": s.Parties["worker"].ParticipantID})(t, s)
			},
			Route: "POST /workspace/handoff/accept", As: "worker2", Args: withHandoff(nil),
			Status: http.StatusNotFound, Error: "handoff_not_found"},
		{Name: "a null answer to task/update is 400 invalid_request",
			Before: handoffAt("asked", nil), Route: "POST /workspace/task/update", As: "owner",
			Args:   withTask(map[string]any{"input_responses": map[string]any{"k": nil}}),
			Status: http.StatusBadRequest, Error: "invalid_request"},

		// ---- unknown and foreign look the same ----
		{Name: "GET /workspace/task of a foreign task is 404 task_not_found, as an unknown one",
			Before: handoffAt("accepted", nil), Route: "GET /workspace/task", As: "outsider", Args: withTask(nil),
			Status: http.StatusNotFound, Error: "task_not_found",
			After: sameAsUnknown("GET", "/workspace/task", "outsider", "task_id", unknownTask, nil)},
		{Name: "POST /workspace/task/update of a foreign task is 404 task_not_found, as an unknown one",
			Before: handoffAt("asked", nil), Route: "POST /workspace/task/update", As: "outsider",
			Args:   withTask(map[string]any{"input_responses": answer}),
			Status: http.StatusNotFound, Error: "task_not_found",
			After: sameAsUnknown("POST", "/workspace/task/update", "outsider", "task_id", unknownTask, map[string]any{"input_responses": answer})},
		{Name: "POST /workspace/task/cancel of a foreign task is 404 task_not_found, as an unknown one",
			Before: handoffAt("accepted", nil), Route: "POST /workspace/task/cancel", As: "outsider", Args: withTask(nil),
			Status: http.StatusNotFound, Error: "task_not_found",
			After: sameAsUnknown("POST", "/workspace/task/cancel", "outsider", "task_id", unknownTask, nil)},
		{Name: "GET /workspace/task without task_id is 404 task_not_found",
			Route: "GET /workspace/task", As: "owner", Status: http.StatusNotFound, Error: "task_not_found"},
		{Name: "completing an unknown handoff is 404 handoff_not_found",
			Route: "POST /workspace/handoff/complete", As: "worker",
			Body:   map[string]any{"handoff_id": unknownHandoff, "result": map[string]any{"text": "x"}},
			Status: http.StatusNotFound, Error: "handoff_not_found"},

		// ---- bad input ----
		{Name: "a wrong type is 400 invalid_request naming the field",
			Route: "POST /workspace/handoff", As: "owner", Body: map[string]any{"summary": 7},
			Status: http.StatusBadRequest, Error: "invalid_request", After: fieldIs("summary")},
		{Name: "a limit that is not a number is 400 invalid_request",
			Before: handoffAt("open", nil), Route: "GET /workspace/handoff/events", As: "owner",
			Args:   withHandoff(map[string]any{"limit": "many"}),
			Status: http.StatusBadRequest, Error: "invalid_request"},
		{Name: "a summary over 2000 characters is 429 limit_exceeded naming it",
			Route: "POST /workspace/handoff", As: "owner", Body: map[string]any{"summary": strings.Repeat("é", 2001)},
			Status: http.StatusTooManyRequests, Error: "limit_exceeded", After: fieldIs("summary")},
		{Name: "constraints over 8000 characters are 429 limit_exceeded",
			Route: "POST /workspace/handoff", As: "owner", Body: map[string]any{"summary": "ok", "constraints": strings.Repeat("c", 8001)},
			Status: http.StatusTooManyRequests, Error: "limit_exceeded"},
		{Name: "a summary of exactly 2000 characters is accepted",
			Route: "POST /workspace/handoff", As: "owner", Body: map[string]any{"summary": strings.Repeat("é", 2000)},
			Contains: []string{`"status":"open"`}},

		// ---- who may ----
		{Name: "creating without propose is 403 permission_denied",
			Route: "POST /workspace/handoff", As: "worker", Body: map[string]any{"summary": "no propose"},
			Status: http.StatusForbidden, Error: "permission_denied", Contains: []string{`"required":"propose"`}},
		{Name: "approving without approve is 403 permission_denied",
			Before: handoffAt("result_ready", nil), Route: "POST /workspace/handoff/approve", As: "owner", Args: withHandoff(nil),
			Status: http.StatusForbidden, Error: "permission_denied", Contains: []string{`"required":"approve"`}},
		{Name: "creating with no session is 401 unauthorized",
			Route: "POST /workspace/handoff", Body: map[string]any{"summary": "anon"},
			Status: http.StatusUnauthorized, Error: "unauthorized"},
		{Name: "reading a task with no session is 401 unauthorized",
			Before: handoffAt("open", nil), Route: "GET /workspace/task", Args: withTask(nil),
			Status: http.StatusUnauthorized, Error: "unauthorized"},
	}
	for _, path := range []string{"/workspace/handoff/events", "/workspace/handoff"} {
		cases = append(cases, roomtest.Scenario{
			Name:   "GET " + path + " of a foreign handoff is 404 handoff_not_found, as an unknown one",
			Before: handoffAt("accepted", nil), Route: "GET " + path, As: "outsider", Args: withHandoff(nil),
			Status: http.StatusNotFound, Error: "handoff_not_found",
			After: sameAsUnknown("GET", path, "outsider", "handoff_id", unknownHandoff, nil)})
	}
	for _, path := range []string{"/workspace/handoff", "/workspace/handoff/accept", "/workspace/handoff/request_input",
		"/workspace/handoff/complete", "/workspace/handoff/approve", "/workspace/handoff/reject",
		"/workspace/task/update", "/workspace/task/cancel"} {
		for _, bad := range []struct{ name, body string }{{"cut short", `{"handoff_id":`}, {"an array", `[1]`}, {"two values", `{"a":1} {"b":2}`}} {
			cases = append(cases, roomtest.Scenario{Name: "POST " + path + " with " + bad.name + " is 400 invalid_request",
				Route: "POST " + path, As: "worker", Body: bad.body, Status: http.StatusBadRequest, Error: "invalid_request"})
		}
	}
	roomtest.Scenarios{Open: openScenarioRoom, Parties: handoffParties, Cases: cases}.Run(t)
}
