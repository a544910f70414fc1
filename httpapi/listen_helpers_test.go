package httpapi

// Helpers for the end-to-end tests of subscriptions/listen and the legacy
// GET /mcp stream: a room whose limits and hub configuration a test chooses,
// MCP calls (through mtClient) named for what the listen tests do, and the
// listen view of an SSE stream (mcptest's reader, each frame decoded as a
// JSON-RPC message and checked against the listen's rules). Nothing here
// sleeps: every wait is on a frame, the end of a stream, or a context
// deadline.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// lsWait bounds every wait for a frame that must arrive.
const lsWait = 20 * time.Second

// lsOpts chooses what lsHarness changes from the default harness.
type lsOpts struct {
	Limits func(*room.Limits) // adjusts room.Defaults()
	Hub    listen.Config      // Logger and Now are filled in when nil
	// Gate, when set, stands between the room's writer and the hub; see lsGate.
	Gate *lsGate
	// InMemory puts the room's files on tmpfs (/dev/shm) when there is
	// one, for tests that push megabytes through the sidecar: its commits
	// fsync, and on a disk that, not the code under test, would dominate.
	InMemory bool
	// Actor adjusts the room actor's configuration (the sweeper, the file
	// watcher) after the harness has filled it in.
	Actor func(*actor.Config)
	// Server adjusts the front door's configuration (timeouts, caps).
	Server func(*Config)
}

// lsTempDir is t.TempDir(), on /dev/shm when asked and available.
func lsTempDir(t testing.TB, inMemory bool) string {
	t.Helper()
	if inMemory {
		if dir, err := os.MkdirTemp("/dev/shm", "ce-listen-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// lsGate is the room's Publisher in front of the hub. Armed, it holds the
// next batch the writer hands over, reports whether the writer had already
// answered that batch's caller (the writer's Commands counter moved past
// the count taken when arming: runBatch counts each command just before
// answering it), and forwards the batch only when released. That makes
// the window between "the caller has its answer" and "the hub has the
// change" as wide as a test needs, without sleeping.
type lsGate struct {
	hub     *listen.Hub
	mu      sync.Mutex
	room    *actor.Room
	armed   bool
	base    uint64
	entered chan bool
	release chan struct{}
}

func (g *lsGate) Publish(b listen.Batch) {
	g.mu.Lock()
	armed, base, r := g.armed, g.base, g.room
	g.armed = false
	g.mu.Unlock()
	if armed {
		g.entered <- r.Stats().Commands.Load() > base
		<-g.release
	}
	g.hub.Publish(b)
}

// arm catches the next batch. Nothing else may be writing meanwhile.
func (g *lsGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	g.base = g.room.Stats().Commands.Load()
}

// ---- a publication barrier ----

// lsBarrier proves that every change committed so far has reached the hub
// and been fanned out: the hub takes batches in commit order, so once a
// stream that follows only the document gets the frame of a new edit,
// everything committed before that edit was fanned out too. Without it, a
// listen opened right after a change may still be offered that change (the
// writer answers before it publishes; see TestListenReconnect…), which would
// make the tests that are not about that window flaky.
type lsBarrier struct {
	h   *roomHarness
	tok string
	s   *lsStream
}

// lsNewBarrier must be created before the test edits the document.
func lsNewBarrier(t testing.TB, h *roomHarness, c *http.Client) *lsBarrier {
	t.Helper()
	g := h.session("barrier", "read")
	s, _ := lsListen(t, h, c, g.SessionToken, `"barrier"`, map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
	return &lsBarrier{h: h, tok: g.SessionToken, s: s}
}

// wait appends a character to the file, has the room record it, and waits
// for its frame.
func (b *lsBarrier) wait(t testing.TB) {
	t.Helper()
	cur, err := os.ReadFile(b.h.Doc)
	if err != nil {
		t.Fatal(err)
	}
	lsEdit(t, b.h, b.tok, string(cur)+".")
	b.s.expectRes(t, b.h.Eng.DocumentURI())
}

// ---- a small MCP client ----

// lsID is a raw JSON id as mcptest sends it ("" for a notification).
func lsID(id string) any {
	if id == "" {
		return mcptest.NoID
	}
	return json.RawMessage(id)
}

// lsReply is a finished JSON-RPC exchange.
type lsReply struct {
	Status int
	Header http.Header
	Body   []byte
	ID     json.RawMessage
	Result map[string]any
	Error  *lsRPCError
}

type lsRPCError = mcptest.RPCError

// lsCall sends one MCP request with mtClient (which checks the rules every
// answer follows) and decodes the answer (which must be JSON).
func lsCall(t testing.TB, h *roomHarness, token, id, method string, params map[string]any, tasks bool) lsReply {
	t.Helper()
	res := mcpClient(h, token, tasks).do(t, mtReq{ID: lsID(id), Method: method, Params: params, Timeout: lsWait})
	r := lsReply{Status: res.Status, Header: res.Header, Body: res.Raw}
	if id == "" { // a notification: 202 and no body expected
		return r
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want application/json; status %d body %.300s", method, ct, res.Status, res.Raw)
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  map[string]any  `json:"result"`
		Error   *lsRPCError     `json:"error"`
	}
	if err := json.Unmarshal(res.Raw, &m); err != nil {
		t.Fatalf("%s: answer is not JSON-RPC: %v\n%s", method, err, res.Raw)
	}
	r.ID, r.Result, r.Error = m.ID, m.Result, m.Error
	return r
}

// lsOK is lsCall requiring a result.
func lsOK(t testing.TB, h *roomHarness, token, method string, params map[string]any, tasks bool) map[string]any {
	t.Helper()
	r := lsCall(t, h, token, "1", method, params, tasks)
	if r.Error != nil || r.Result == nil {
		t.Fatalf("%s %v: status %d, error %+v; body %.500s", method, params, r.Status, r.Error, r.Body)
	}
	return r.Result
}

// lsTool calls a tool and returns its structuredContent; a tool error fails
// (mtClient.toolOK's checks).
func lsTool(t testing.TB, h *roomHarness, token, name string, args map[string]any) map[string]any {
	t.Helper()
	return mcpClient(h, token, false).toolOK(t, name, args)
}

// lsNotify sends a client notification (no id) and requires 202.
func lsNotify(t testing.TB, h *roomHarness, token, method string, params map[string]any) {
	t.Helper()
	r := lsCall(t, h, token, "", method, params, false)
	if r.Status != http.StatusAccepted {
		t.Fatalf("%s: status %d, want 202; body %s", method, r.Status, r.Body)
	}
}

// lsCancelListen sends notifications/cancelled naming requestID (raw JSON).
func lsCancelListen(t testing.TB, h *roomHarness, token, requestID string) {
	t.Helper()
	lsNotify(t, h, token, "notifications/cancelled", map[string]any{"requestId": json.RawMessage(requestID), "reason": "done"})
}

// ---- tasks ----

// lsTaskRef is a handoff and its task.
type lsTaskRef struct{ HandoffID, TaskID string }

// lsCreateTask creates a handoff with the Tasks extension declared and
// returns the handle's ids.
func lsCreateTask(t testing.TB, h *roomHarness, token, summary string) lsTaskRef {
	t.Helper()
	tid, hid := mcpClient(h, token, true).createTask(t, map[string]any{"summary": summary})
	return lsTaskRef{HandoffID: hid, TaskID: tid}
}

func lsAccept(t testing.TB, h *roomHarness, token string, x lsTaskRef) {
	t.Helper()
	lsTool(t, h, token, "handoff_accept", map[string]any{"handoff_id": x.HandoffID})
}

// lsAsk has the assignee ask the owner one question under key.
func lsAsk(t testing.TB, h *roomHarness, token string, x lsTaskRef, key, message string) {
	t.Helper()
	lsTool(t, h, token, "handoff_request_input", map[string]any{"handoff_id": x.HandoffID,
		"requests": []any{map[string]any{"key": key, "message": message}}})
}

// lsAnswer has the owner answer key with tasks/update.
func lsAnswer(t testing.TB, h *roomHarness, token string, x lsTaskRef, key string) {
	t.Helper()
	res := lsOK(t, h, token, "tasks/update", map[string]any{"taskId": x.TaskID, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"answer": "yes to " + key}}}}, true)
	if res["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v", res)
	}
}

func lsComplete(t testing.TB, h *roomHarness, token string, x lsTaskRef, text string) {
	t.Helper()
	lsTool(t, h, token, "handoff_complete", map[string]any{"handoff_id": x.HandoffID, "result": map[string]any{"text": text}})
}

func lsCancelTask(t testing.TB, h *roomHarness, token string, x lsTaskRef) {
	t.Helper()
	mtWantAck(t, mcpClient(h, token, true).taskCall(t, "tasks/cancel", x.TaskID, nil))
}

// lsTaskGet is tasks/get's result.
func lsTaskGet(t testing.TB, h *roomHarness, token string, x lsTaskRef) map[string]any {
	t.Helper()
	return mcpClient(h, token, true).taskGet(t, x.TaskID)
}

// lsSameTask checks that a notifications/tasks frame's params, without
// _meta.subscriptionId, equal a tasks/get result without resultType and
// _meta.serverInfo.
func lsSameTask(t testing.TB, f lsFrame, get map[string]any) {
	t.Helper()
	params := map[string]any{}
	for k, v := range f.Msg.Params {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatalf("frame params.%s: %v", k, err)
		}
		params[k] = x
	}
	params = lsWithoutMeta(params, mcptest.MetaSubscriptionID)
	want := lsWithoutMeta(get, mcptest.MetaServerInfo)
	delete(want, "resultType")
	if !reflect.DeepEqual(params, want) {
		a, _ := json.Marshal(params)
		b, _ := json.Marshal(want)
		t.Fatalf("notifications/tasks params differ from tasks/get:\n frame:     %s\n tasks/get: %s", a, b)
	}
}

// lsWithoutMeta copies m without _meta[key], dropping _meta when it empties.
func lsWithoutMeta(m map[string]any, key string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	if meta, ok := out["_meta"].(map[string]any); ok {
		c := map[string]any{}
		for k, v := range meta {
			if k != key {
				c[k] = v
			}
		}
		if len(c) == 0 {
			delete(out, "_meta")
		} else {
			out["_meta"] = c
		}
	}
	return out
}

// ---- the document ----

// lsEdit replaces the file out of band, then makes the room notice with a
// workspace_status call through /mcp, and returns the version it reports.
// Contents must differ in length from the previous ones: the file's stamp
// (size, mtime, inode) is how the room notices an edit, and two writes within
// one clock tick keep the same mtime.
func lsEdit(t testing.TB, h *roomHarness, token, content string) int64 {
	t.Helper()
	before := lsVersion(t, h, token)
	if err := os.WriteFile(h.Doc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	after := lsVersion(t, h, token)
	if after != before+1 {
		t.Fatalf("the out-of-band edit made version %d, want %d", after, before+1)
	}
	return after
}

func lsVersion(t testing.TB, h *roomHarness, token string) int64 {
	t.Helper()
	st := lsTool(t, h, token, "workspace_status", map[string]any{})
	v, ok := st["version"].(float64)
	if !ok {
		t.Fatalf("workspace_status has no version: %v", st)
	}
	return int64(v)
}

// lsDoc builds a document from the three sections' bodies.
func lsDoc(idea, goals, plan string) string {
	return "# Idea\n\n" + idea + "\n\n## Goals\n\n" + goals + "\n\n## Plan\n\n" + plan + "\n"
}

// ---- SSE streams ----

// lsMsg is one JSON-RPC message read from a stream; params and result are
// decoded member by member (a repeated key: the last one wins, as in any
// generic JSON decoder).
type lsMsg struct {
	JSONRPC string                     `json:"jsonrpc"`
	ID      json.RawMessage            `json:"id"`
	Method  string                     `json:"method"`
	Params  map[string]json.RawMessage `json:"params"`
	Result  map[string]json.RawMessage `json:"result"`
	Error   json.RawMessage            `json:"error"`
}

// lsFrame is one SSE event's data, decoded once by the reader goroutine.
type lsFrame struct {
	Data []byte
	Msg  lsMsg
	Err  error    // the data is not a JSON-RPC object
	Dups []string // object keys that occur twice in one object

	meta      map[string]json.RawMessage
	uri       string
	taskID    string
	status    string
	inputKeys []string
}

func (f lsFrame) String() string {
	if len(f.Data) > 300 {
		return string(f.Data[:300]) + "…"
	}
	return string(f.Data)
}

// IsFinal reports a response (the listen's final result) rather than a notification.
func (f lsFrame) IsFinal() bool {
	return f.Msg.Method == "" && (f.Msg.Result != nil || f.Msg.Error != nil)
}

// Meta is params._meta (or result._meta) member by member, as a generic
// JSON decoder (JSON.parse, a map in Go) reads it: when a key is repeated,
// the last one wins.
func (f lsFrame) Meta() map[string]json.RawMessage { return f.meta }

// URI is params.uri of a resources/updated frame.
func (f lsFrame) URI() string { return f.uri }

// Task is the task id, status and outstanding input keys of a
// notifications/tasks frame.
func (f lsFrame) Task() (id, status string, inputKeys []string) {
	return f.taskID, f.status, f.inputKeys
}

// lsDupCheckMax bounds the frames searched for repeated keys: the search is
// a token walk, slow on the megabytes the stalled-reader test pushes, and
// the small frames of every other test cover the same encoder.
const lsDupCheckMax = 64 << 10

// lsParseFrame decodes one event's data (params and result member by
// member, so the bulk is scanned as few times as possible) and looks for
// duplicate keys, which a JSON decoder silently resolves to the last one.
func lsParseFrame(data []byte) lsFrame {
	f := lsFrame{Data: data}
	if err := json.Unmarshal(data, &f.Msg); err != nil {
		f.Err = err
		return f
	}
	if len(data) <= lsDupCheckMax {
		f.Dups = mcptest.DupKeys(data)
	}
	p := f.Msg.Params
	if f.IsFinal() {
		p = f.Msg.Result
	}
	_ = json.Unmarshal(p["_meta"], &f.meta)
	_ = json.Unmarshal(p["uri"], &f.uri)
	_ = json.Unmarshal(p["taskId"], &f.taskID)
	_ = json.Unmarshal(p["status"], &f.status)
	var inputs map[string]json.RawMessage
	_ = json.Unmarshal(p["inputRequests"], &inputs)
	for k := range inputs {
		f.inputKeys = append(f.inputKeys, k)
	}
	slices.Sort(f.inputKeys)
	return f
}

// lsStream is one open SSE response (mcptest's reader, started by read);
// frames are decoded as the test consumes them.
type lsStream struct {
	*mcptest.Stream
	name string
	id   string // the listen request id as raw JSON ("" for GET /mcp)

	mu   sync.Mutex
	seen map[string]bool // problems already reported
}

// first reports whether problem is seen on this stream for the first time.
func (s *lsStream) first(problem string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if s.seen[problem] {
		return false
	}
	s.seen[problem] = true
	return true
}

// lsClient is a client for streams: no overall timeout (each wait has its
// own deadline) and a connection per stream.
func lsClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

// lsOpen sends req and, if the answer is an event stream, returns it (not yet
// read). Otherwise it returns the answer as a finished lsReply.
func lsOpen(t testing.TB, c *http.Client, req *http.Request, cancel context.CancelFunc, name string) (*lsStream, *lsReply) {
	t.Helper()
	st, res, err := mcptest.OpenSSE(c, req, cancel, name)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		r := &lsReply{Status: res.Status, Header: res.Header, Body: res.Raw}
		if rep, err := res.Reply(); err == nil {
			r.ID, r.Error = rep.ID, rep.Error
		}
		return nil, r
	}
	s := &lsStream{Stream: st, name: name}
	t.Cleanup(s.close)
	return s, nil
}

// lsListenReq opens subscriptions/listen and returns either the stream or the
// refusal. notifications is params.notifications (omitted when nil).
func lsListenReq(t testing.TB, h *roomHarness, c *http.Client, token, id string, notifications any, tasks bool) (*lsStream, *lsReply) {
	t.Helper()
	params := map[string]any{}
	if notifications != nil {
		params["notifications"] = notifications
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := azMCPRequest(ctx, t, h.ingressURL("/mcp"), id, "subscriptions/listen", params, tasks, withBearer(token))
	s, r := lsOpen(t, c, req, cancel, "listen "+id)
	if s != nil {
		s.id = id
	}
	return s, r
}

// lsListen opens a listen that must be answered with a stream, starts
// reading it and returns it with its acknowledged notifications.
func lsListen(t testing.TB, h *roomHarness, c *http.Client, token, id string, notifications any, tasks bool) (*lsStream, map[string]json.RawMessage) {
	t.Helper()
	s, r := lsListenReq(t, h, c, token, id, notifications, tasks)
	if s == nil {
		t.Fatalf("listen %s was refused: %d %s", id, r.Status, r.Body)
	}
	s.read()
	return s, s.ack(t)
}

// lsLegacyGet opens GET /mcp with a bearer session.
func lsLegacyGet(t testing.TB, h *roomHarness, c *http.Client, token, accept string) (*lsStream, *lsReply) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var opts []reqOpt
	if accept != "" {
		opts = append(opts, withHeader("Accept", accept))
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", h.ingressURL("/mcp"), token, nil, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return lsOpen(t, c, req, cancel, "GET /mcp")
}

// read starts the reader goroutine. A test that wants a stalled reader opens
// a stream and does not call read until it wants to look.
func (s *lsStream) read() { s.Start() }

// nextCtx returns the next unread frame, or an error when the stream ends or
// ctx does.
func (s *lsStream) nextCtx(ctx context.Context) (lsFrame, error) {
	f, err := s.Next(ctx)
	if err != nil {
		return lsFrame{}, err
	}
	return lsParseFrame(f.Data), nil
}

// next returns the next frame or fails t after lsWait.
func (s *lsStream) next(t testing.TB) lsFrame {
	t.Helper()
	f := lsParseFrame(s.Wait(t, lsWait).Data)
	if f.Err != nil {
		t.Fatalf("%s: frame is not JSON: %v: %s", s.name, f.Err, f)
	}
	return f
}

// endCtx waits for the stream to end and returns the frames not yet read.
func (s *lsStream) endCtx(ctx context.Context) ([]lsFrame, error) {
	rest, err := s.End(ctx)
	return lsParseFrames(rest), err
}

// end waits (up to lsWait) for the stream to end; it returns the unread frames.
func (s *lsStream) end(t testing.TB) []lsFrame {
	t.Helper()
	return lsParseFrames(s.WaitEnd(t, lsWait))
}

// lsParseFrames decodes frames in order.
func lsParseFrames(raw []mcptest.Frame) []lsFrame {
	out := make([]lsFrame, len(raw))
	for i, f := range raw {
		out[i] = lsParseFrame(f.Data)
	}
	return out
}

// close abandons the stream from the client side. It is idempotent.
func (s *lsStream) close() { s.Close() }

// ack reads the first frame and checks it is the acknowledgement for this
// listen; it returns params.notifications member by member.
func (s *lsStream) ack(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.AckMethod)
	var p struct {
		Notifications map[string]json.RawMessage
	}
	if err := json.Unmarshal(f.Msg.Params["notifications"], &p.Notifications); err != nil || p.Notifications == nil {
		t.Fatalf("%s: acknowledgement without params.notifications object: %s", s.name, f)
	}
	return p.Notifications
}

// check asserts a notification frame: JSON-RPC 2.0, the method, no id, no
// repeated keys, and (for a listen) _meta.subscriptionId equal to the listen
// request id byte for byte, so a number stays a number and a string a string;
// for GET /mcp no subscriptionId at all.
func (s *lsStream) check(t testing.TB, f lsFrame, method string) {
	t.Helper()
	if f.Err != nil {
		t.Fatalf("%s: frame is not JSON: %v: %s", s.name, f.Err, f)
	}
	if f.Msg.JSONRPC != "2.0" || f.Msg.Method != method || f.Msg.ID != nil {
		t.Fatalf("%s: got %s, want a %s notification", s.name, f, method)
	}
	// Each kind of problem is reported once per stream, or the log drowns.
	if len(f.Dups) > 0 && s.first("dup") {
		t.Errorf("%s: %s frame repeats keys %v in one object (a JSON decoder keeps only the last): %s", s.name, method, f.Dups, f)
	}
	got := f.Meta()[mcptest.MetaSubscriptionID]
	if s.id == "" {
		if got != nil && s.first("legacy-id") {
			t.Errorf("%s: a GET /mcp frame carries a subscriptionId: %s", s.name, f)
		}
		return
	}
	if !bytes.Equal(lsCompact(got), lsCompact(json.RawMessage(s.id))) && s.first("id "+method) {
		t.Errorf("%s: %s frame as a JSON decoder reads it has _meta[%q] = %s, want %s (same JSON type): %s",
			s.name, method, mcptest.MetaSubscriptionID, got, s.id, f)
	}
}

// expect reads the next frame and checks it is method (and for resources,
// about uri; for tasks, about task id and status).
func (s *lsStream) expectRes(t testing.TB, uri string) lsFrame {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.ResourceMethod)
	if f.URI() != uri {
		t.Fatalf("%s: resources/updated for %q, want %q", s.name, f.URI(), uri)
	}
	return f
}

func (s *lsStream) expectTask(t testing.TB, taskID, status string) lsFrame {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.TaskMethod)
	if id, st, _ := f.Task(); id != taskID || st != status {
		t.Fatalf("%s: notifications/tasks for %s %s, want %s %s: %s", s.name, id, st, taskID, status, f)
	}
	return f
}

// expectFinal checks the graceful end: the listen's own response with
// resultType complete and the subscriptionId, then the end of the stream.
func (s *lsStream) expectFinal(t testing.TB) {
	t.Helper()
	f := s.next(t)
	lsCheckFinal(t, s, f)
	if rest := s.end(t); len(rest) > 0 {
		t.Fatalf("%s: frames after the final result: %v", s.name, rest)
	}
}

func lsCheckFinal(t testing.TB, s *lsStream, f lsFrame) {
	t.Helper()
	if !f.IsFinal() || f.Msg.JSONRPC != "2.0" || f.Msg.Error != nil {
		t.Fatalf("%s: got %s, want the final result", s.name, f)
	}
	if !bytes.Equal(lsCompact(f.Msg.ID), lsCompact(json.RawMessage(s.id))) {
		t.Errorf("%s: final result id %s, want %s", s.name, f.Msg.ID, s.id)
	}
	res := f.Msg.Result
	if string(res["resultType"]) != `"complete"` {
		t.Errorf("%s: final resultType %s, want \"complete\"", s.name, res["resultType"])
	}
	for k := range res {
		if k != "resultType" && k != "_meta" {
			t.Errorf("%s: final result has member %q; SubscriptionsListenResult has only resultType and _meta", s.name, k)
		}
	}
	if got := f.Meta()[mcptest.MetaSubscriptionID]; !bytes.Equal(lsCompact(got), lsCompact(json.RawMessage(s.id))) {
		t.Errorf("%s: final _meta[%q] = %s, want %s", s.name, mcptest.MetaSubscriptionID, got, s.id)
	}
	if len(f.Dups) > 0 {
		t.Errorf("%s: final result repeats keys %v", s.name, f.Dups)
	}
}

func lsCompact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// lsStrings decodes an acknowledged list.
func lsStrings(t testing.TB, raw json.RawMessage) []string {
	t.Helper()
	if raw == nil {
		return nil
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("acknowledged list %s: %v", raw, err)
	}
	return out
}

// lsSameSet compares two lists as sets and rejects duplicates in got.
func lsSameSet(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w) && len(slices.Compact(slices.Clone(g))) == len(g)
}

// lsSessions joins n sessions holding caps through one multi-use invitation,
// a few joins at a time.
func lsSessions(t testing.TB, h *roomHarness, n int, caps ...string) []sessionGrant {
	t.Helper()
	inv := h.createInvite(map[string]any{"capabilities": caps, "max_uses": n, "max_live_sessions": n})
	out, err := mcptest.JoinMany(context.Background(), h.client, h.Ingress.URL, inv.URI, "s%03d", "", n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lsEach runs f for every stream concurrently, each with its own deadline,
// and fails t with every error.
func lsEach(t testing.TB, streams []*lsStream, f func(ctx context.Context, s *lsStream) error) {
	t.Helper()
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			errs[i] = f(ctx, s)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		msg := err.Error()
		if len(msg) > 4000 {
			msg = msg[:4000] + "…"
		}
		t.Fatal(msg)
	}
}

// lsErrT lets helpers that call t.Fatal run on goroutines the test started:
// a fatal error is recorded and ends only that goroutine; report fails the
// test from its own goroutine.
type lsErrT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func lsCollect(t testing.TB) *lsErrT { return &lsErrT{TB: t} }

func (e *lsErrT) Helper() {}

func (e *lsErrT) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *lsErrT) Error(args ...any) { e.Errorf("%s", fmt.Sprint(args...)) }
func (e *lsErrT) Fail()             { e.Errorf("failed") }
func (e *lsErrT) FailNow()          { e.Fail(); runtime.Goexit() }

func (e *lsErrT) Fatalf(format string, args ...any) {
	e.Errorf(format, args...)
	runtime.Goexit()
}

func (e *lsErrT) Fatal(args ...any) {
	e.Error(args...)
	runtime.Goexit()
}

func (e *lsErrT) Failed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs) > 0
}

// report fails t (from the test's goroutine) with what was collected.
func (e *lsErrT) report(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return
	}
	msg := strings.Join(e.errs, "\n")
	if len(msg) > 4000 {
		msg = msg[:4000] + "…"
	}
	t.Fatalf("%d error(s):\n%s", len(e.errs), msg)
}
