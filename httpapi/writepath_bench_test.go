package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/internal/cpuclock"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

// BenchmarkWritePath drives one handoff lifecycle per op through the real
// ingress handler in process, the four MCP tools/call steps the bench's
// lifecycle scenario sends (handoff_create as a task, handoff_accept by the
// assignee, handoff_complete, handoff_approve by the creator), each a write
// that waits on the actor's commit. No client or socket: allocs/op and
// cpu-ns/op are the front door's and the writer's cost of four steps, so the
// door's share shows beside BenchmarkReadPath's reads in a diff.
// door-cpu-ns/step is the CPU of the goroutine that runs the handler alone
// (locked to its thread): the front door's cost per step without the
// writer's, which is most of cpu-ns/step (one fsync'd commit per step here).
func BenchmarkWritePath(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	env := newBenchServer(b)
	worker := env.join(b, "worker")
	boss := env.join(b, "boss", "read", "observe", "propose", "checkout", "commit", "approve")
	create := func() *http.Request {
		return env.localAs(b, boss.token, "tools/call", map[string]any{"name": "handoff_create", "arguments": map[string]any{"summary": "bench work", "assignee": worker.id}})
	}
	step := func(tool, token string, args map[string]any) *http.Request {
		return env.localAs(b, token, "tools/call", map[string]any{"name": tool, "arguments": args})
	}
	// The setup's 32 tasks fill the room's cap: free one for the lifecycle.
	serveBody(b, env.handler, env.local(b, "tasks/cancel", map[string]any{"taskId": env.tasks[0]}))
	// Warm up once: the first write of each kind prepares its statements.
	lifecycle(b, env, boss, worker, create, step)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	doorCPU = 0
	for b.Loop() {
		lifecycle(b, env, boss, worker, create, step)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/4, "cpu-ns/step")
	if _, ok := cpuclock.Thread(); ok {
		b.ReportMetric(float64(doorCPU)/float64(b.N)/4, "door-cpu-ns/step")
	}
}

// lifecycle runs one create → accept → complete → approve through env's
// handler, failing the benchmark on any answer that is not a success.
func lifecycle(b *testing.B, env *benchServer, boss, worker benchParty, create func() *http.Request, step func(tool, token string, args map[string]any) *http.Request) {
	body := serveBody(b, env.handler, create())
	var res struct {
		Result struct {
			ResultType string `json:"resultType"`
			Meta       struct {
				HandoffID string `json:"commonroom/handoff_id"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Result.ResultType != "task" || res.Result.Meta.HandoffID == "" {
		b.Fatalf("handoff_create: not a task handle: %s", body)
	}
	id := res.Result.Meta.HandoffID
	serveBody(b, env.handler, step("handoff_accept", worker.token, map[string]any{"handoff_id": id}))
	serveBody(b, env.handler, step("handoff_complete", worker.token, map[string]any{"handoff_id": id, "result": map[string]any{"text": "done by the bench"}}))
	serveBody(b, env.handler, step("handoff_approve", boss.token, map[string]any{"handoff_id": id}))
}

// serveBody runs r through h and returns the answer's body, failing the
// benchmark on an answer that is not a 200 success.
func serveBody(b *testing.B, h http.Handler, r *http.Request) []byte {
	rec := newConnRecorder()
	t0, _ := cpuclock.Thread()
	h.ServeHTTP(rec, r)
	t1, _ := cpuclock.Thread()
	doorCPU += t1 - t0
	out := rec.Body.Bytes()
	if rec.Code != http.StatusOK || bytes.Contains(out, []byte(`"isError":true`)) || bytes.Contains(out, []byte(`"error":{`)) {
		b.Fatalf("status %d: %s", rec.Code, out)
	}
	return out
}

// doorCPU is the handler goroutine's CPU summed over serveBody's calls.
var doorCPU int64

// benchParty is a second session in the bench room.
type benchParty struct{ id, token string }

// join admits another agent to env's room with caps (none: the default
// agent caps).
func (e *benchServer) join(b *testing.B, name string, caps ...string) benchParty {
	ctx := context.Background()
	op := room.Operator(e.eng.HostID)
	g, err := actor.Do(ctx, e.room, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
		return e.eng.CreateInvite(tx, op, room.InviteInput{Capabilities: caps})
	})
	if err != nil {
		b.Fatal(err)
	}
	s, err := actor.Do(ctx, e.room, "join", func(tx *room.Tx) (room.SessionGrant, error) {
		return e.eng.Join(tx, room.JoinInput{Secret: g.Token, Name: name})
	})
	if err != nil {
		b.Fatal(err)
	}
	return benchParty{id: s.ParticipantID, token: s.SessionToken}
}

// localAs is local with another session's bearer token ("": the bench
// client's own).
func (e *benchServer) localAs(b *testing.B, token, method string, params map[string]any) *http.Request {
	req, _, err := e.mcp.NewRequest(context.Background(), mcptest.Request{ID: 1, Method: method, Params: params, Token: token})
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	r.Header = req.Header.Clone()
	r.Host = "127.0.0.1"
	return r
}
