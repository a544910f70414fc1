package apitest_test

// The kit, used black-box as the doors' and the CLI's tests use it: a
// scenario table at both doors against ce serve's real front door, and
// proof that each of its checks can fail.

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

var parties = []roomtest.PartySpec{
	{Name: "reader", Caps: []string{"read"}},
	{Name: "agent"}, // the default agent grant
}

func TestScenariosAtBothDoors(t *testing.T) {
	roomtest.Scenarios{Open: apitest.Open, Parties: parties, Cases: []roomtest.Scenario{
		{Name: "a reader reads the status over HTTP", Route: "GET /workspace/status", As: "reader",
			Contains: []string{`"version":1`}},
		{Name: "a reader reads a section with its query", Route: "GET /workspace/read", As: "reader",
			Body: map[string]any{"section": "Goals"}, Contains: []string{"ship it"}, Lacks: []string{"step one"}},
		{Name: "a reader may not hand work over HTTP", Route: "POST /workspace/handoff", As: "reader",
			Body: map[string]any{"summary": "x"}, Status: http.StatusForbidden, Error: "permission_denied"},
		{Name: "the operator reads the invitations on the owner listener", Route: "GET /workspace/invites", Owner: true,
			As: roomtest.Operator},
		{Name: "no session is 401 over HTTP", Route: "GET /workspace/status", Status: http.StatusUnauthorized, Error: "unauthorized"},
		{Name: "a reader reads the status over MCP", Tool: "workspace_status", As: "reader", Body: map[string]any{},
			Contains: []string{`"version":1`}},
		{Name: "a reader may not hand work over MCP", Tool: "handoff_create", As: "reader",
			Body: map[string]any{"summary": "x"}, Error: "permission_denied"},
		{Name: "an agent hands work over MCP and a handoff row is made", Tool: "handoff_create", As: "agent",
			Body: map[string]any{"summary": "x"},
			After: func(t testing.TB, s *roomtest.Setup, raw []byte) {
				if n := s.H.Count(`SELECT count(*) FROM handoffs`); n != 1 {
					t.Errorf("%d handoffs, want 1", n)
				}
			}},
		{Name: "an unknown task is -32602 on tasks/get", RPC: "tasks/get", As: "agent", Tasks: true,
			Body: map[string]any{"taskId": "task_ffffffffffffffffffffffffffffffff"}, RPCCode: -32602},
	}}.Run(t)
}

// recorder is a testing.TB that keeps failures instead of reporting them,
// so a test can show that a check fails when it should.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}
func (r *recorder) Error(a ...any) { r.Errorf("%s", fmt.Sprint(a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.Errorf(f, a...)
	runtime.Goexit()
}
func (r *recorder) Fatal(a ...any) { r.Fatalf("%s", fmt.Sprint(a...)) }
func (r *recorder) Fail()          { r.Errorf("Fail") }
func (r *recorder) FailNow()       { r.Fatalf("FailNow") }
func (r *recorder) Failed() bool   { r.mu.Lock(); defer r.mu.Unlock(); return len(r.failed) > 0 }

// failures runs fn as a test body on a recorder and returns what it reported.
func failures(t *testing.T, fn func(tb testing.TB)) []string {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec.failed
}

func TestEachCheckCanFail(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil).Harness
	s := &roomtest.Setup{H: h, Parties: map[string]roomtest.Party{"reader": h.Join("reader", "read")}, Vars: map[string]string{}}
	for _, c := range []struct {
		name string
		sc   roomtest.Scenario
		want string
	}{
		{"a wrong status", roomtest.Scenario{Name: "x", Route: "GET /workspace/status", As: "reader", Status: http.StatusTeapot}, "status = 200, want 418"},
		{"a wrong error code", roomtest.Scenario{Name: "x", Route: "POST /workspace/handoff", As: "reader", Body: map[string]any{"summary": "x"},
			Status: http.StatusForbidden, Error: "unauthorized"}, `want "unauthorized"`},
		{"a missing fragment", roomtest.Scenario{Name: "x", Route: "GET /workspace/status", As: "reader", Contains: []string{"no such text"}}, "answer lacks"},
		{"a fragment that must be absent", roomtest.Scenario{Name: "x", Route: "GET /workspace/status", As: "reader", Lacks: []string{"version"}}, "want it absent"},
		{"a tool that succeeds where a refusal is expected", roomtest.Scenario{Name: "x", Tool: "workspace_status", As: "reader", Body: map[string]any{},
			Error: "permission_denied"}, "isError = false, want true"},
		{"a tool refused where success is expected", roomtest.Scenario{Name: "x", Tool: "handoff_create", As: "reader", Body: map[string]any{"summary": "x"}}, "isError, want a result"},
		{"a party the table does not join", roomtest.Scenario{Name: "x", Route: "GET /workspace/status", As: "nobody"}, "which the table does not join"},
		{"two doors at once", roomtest.Scenario{Name: "x", Route: "GET /workspace/status", Tool: "workspace_status"}, "exactly one of Route, Tool and RPC"},
	} {
		t.Run(c.name+" fails", func(t *testing.T) {
			got := failures(t, func(tb testing.TB) { c.sc.Run(tb, s) })
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Errorf("failures = %q, want one containing %q", got, c.want)
			}
		})
	}
	t.Run("a change after a refusal fails the nothing-changed check", func(t *testing.T) {
		before := h.Snapshot()
		h.Join("newcomer", "read") // rows change: an invitation, a participant (the host is one already), a session
		got := failures(t, func(tb testing.TB) { h.AssertUnchanged(tb, before) })
		if len(got) != 1 || !strings.Contains(got[0], "participants: 2 rows -> 3 rows") {
			t.Errorf("failures = %q, want the participants table named", got)
		}
	})
}
