package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// roomFrame is a notifications/tasks frame the room sent to listen request
// id 1234 after handoff_request_input (recorded from ce serve).
const roomFrame = `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1234,"commonroom/handoff_id":"handoff_31916445a3778252d5cdfde43f87050c"},"createdAt":"2026-11-30T02:38:10.665Z","inputRequests":{"q1":{"method":"elicitation/create","params":{"mode":"form","message":"carry on?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}}},"lastUpdatedAt":"2026-11-30T02:38:10.688Z","pollIntervalMs":5000,"status":"input_required","taskId":"task_9497aab30ca8c7b3e9da69a2b16aef59","ttlMs":86400000}}` + "\n\n"

var (
	idPattern   = regexp.MustCompile(`(task|handoff)_[0-9a-f]{32}`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
)

// TestBareFrameIsTheRoomsFrame keeps the bare SSE baseline honest: apart
// from ids and times, its frame is byte for byte the room's, and the
// bench's reader takes its lastUpdatedAt as the publish time.
func TestBareFrameIsTheRoomsFrame(t *testing.T) {
	tpl := newBareTemplate(bareTask{taskID: randomID("task"), handoffID: randomID("handoff")}, true)
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_500_000, time.UTC)
	got := string(tpl.stamp(at).appendTo(nil, []byte(`"io.modelcontextprotocol/subscriptionId":1234,`)))
	norm := func(s string) string {
		return timePattern.ReplaceAllString(idPattern.ReplaceAllString(s, "${1}_ID"), "TIME")
	}
	if norm(got) != norm(roomFrame) || len(got) != len(roomFrame) {
		t.Fatalf("bare frame differs from the room's:\n got %s\nwant %s", got, roomFrame)
	}
	var v struct {
		Params struct {
			LastUpdatedAt string `json:"lastUpdatedAt"`
			Status        string `json:"status"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(got), "data: ")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Params.LastUpdatedAt != "2026-03-04T05:06:07.891Z" || v.Params.Status != "input_required" {
		t.Fatalf("lastUpdatedAt %q, status %q", v.Params.LastUpdatedAt, v.Params.Status)
	}
	if w := newBareTemplate(bareTask{taskID: "task_x", handoffID: "handoff_x"}, false); strings.Contains(string(w.rest), "inputRequests") ||
		!strings.Contains(string(w.rest), `"status":"working"`) {
		t.Fatalf("working frame: %s", w.rest)
	}
}

// TestBareServerSpeaksListen opens a stream on the bare server with the
// same openListen and read the fan-out scenario uses on the room, and sees
// published changes arrive with their publish time and be counted.
func TestBareServerSpeaksListen(t *testing.T) {
	tasks := []bareTask{{taskID: randomID("task"), handoffID: randomID("handoff")}}
	b := newBareSSE(tasks)
	srv := httptest.NewServer(b)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openListen(ctx, listenOptions{addr: strings.TrimPrefix(srv.URL, "http://"), token: "bare", id: 7, taskIDs: []string{tasks[0].taskID}})
	if err != nil {
		t.Fatal(err)
	}
	phase := &fanPhase{}
	var sink frameSink = phase
	var ptr atomic.Pointer[frameSink]
	ptr.Store(&sink)
	s.sink = &ptr
	go s.read()
	defer s.close(true)
	p := &bareSSEProc{addr: strings.TrimPrefix(srv.URL, "http://"), hc: newLoadClient(2)}
	d := &bareDriver{p: p}
	for range 3 {
		if err := d.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for s.frames.Load() < 3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	st, err := p.stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.frames.Load() != 3 || s.other.Load() != 0 || st.Published != 3 || st.Delivered != 3 || st.Dropped != 0 || st.Subscribers != 1 {
		t.Fatalf("frames %d, other %d, stats %+v", s.frames.Load(), s.other.Load(), st)
	}
	if l := phase.lat.snapshot(); l.n != 3 || l.quantile(1) > 5*time.Second {
		t.Fatalf("publish→receipt: %d samples, max %v", l.n, l.quantile(1))
	}
}
