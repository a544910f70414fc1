package roomtest

// Streams as the doors' tests read them: mcptest's SSE reader (a real
// reader over a real HTTP response) with each frame decoded once as a
// JSON-RPC message and checked against the rules of the stream it came on
// (subscriptions/listen, the legacy GET /mcp stream, GET
// /workspace/observe). Here, not in each door's tests, because the plain
// door's white-box tests and the MCP door's black-box tests read the same
// streams. Nothing here sleeps: every wait is on a frame, the end of a
// stream, or a deadline (FrameWait, or the caller's context).

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// FrameWait bounds every wait for a frame that must arrive, so a missing
// frame fails the test with what was seen instead of hanging it.
const FrameWait = 20 * time.Second

// rpcMsg is one JSON-RPC message read from a stream; params and result are
// decoded member by member (a repeated key: the last one wins, as in any
// generic JSON decoder).
type rpcMsg struct {
	JSONRPC string                     `json:"jsonrpc"`
	ID      json.RawMessage            `json:"id"`
	Method  string                     `json:"method"`
	Params  map[string]json.RawMessage `json:"params"`
	Result  map[string]json.RawMessage `json:"result"`
	Error   json.RawMessage            `json:"error"`
}

// Frame is one SSE event's data (a JSON-RPC notification or response),
// decoded once as the test consumes it, so checks read fields instead of
// re-parsing bytes.
type Frame struct {
	Data []byte
	Msg  rpcMsg
	Err  error    // the data is not a JSON-RPC object
	Dups []string // object keys that occur twice in one object

	meta      map[string]json.RawMessage
	uri       string
	taskID    string
	status    string
	inputKeys []string
}

// String is the frame's data, shortened for a failure message.
func (f Frame) String() string { return mcptest.Clip(f.Data) }

// IsFinal reports a response (the listen's final result) rather than a notification.
func (f Frame) IsFinal() bool {
	return f.Msg.Method == "" && (f.Msg.Result != nil || f.Msg.Error != nil)
}

// Meta is params._meta (or result._meta) member by member, as a generic
// JSON decoder (JSON.parse, a map in Go) reads it: when a key is repeated,
// the last one wins.
func (f Frame) Meta() map[string]json.RawMessage { return f.meta }

// URI is params.uri of a resources/updated frame.
func (f Frame) URI() string { return f.uri }

// Task is the task id, status and outstanding input keys of a
// notifications/tasks frame.
func (f Frame) Task() (id, status string, inputKeys []string) {
	return f.taskID, f.status, f.inputKeys
}

// Params is params decoded into generic values (nil when absent or not JSON).
func (f Frame) Params() map[string]any {
	if f.Msg.Params == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range f.Msg.Params {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil
		}
		out[k] = x
	}
	return out
}

// EventID is params.event_id of a notifications/commonroom/event frame.
func (f Frame) EventID() int64 { return Num(f.Params()["event_id"]) }

// EventType is params.event_type of a notifications/commonroom/event frame.
func (f Frame) EventType() string { return Str(f.Params()["event_type"]) }

// dupCheckMax bounds the frames searched for repeated keys: the search is
// a token walk, slow on the megabytes a stalled-reader test pushes, and
// the small frames of every other test cover the same encoder.
const dupCheckMax = 64 << 10

// ParseFrame decodes one event's data (params and result member by
// member, so the bulk is scanned as few times as possible) and looks for
// duplicate keys, which a JSON decoder silently resolves to the last one.
func ParseFrame(data []byte) Frame {
	f := Frame{Data: data}
	if err := json.Unmarshal(data, &f.Msg); err != nil {
		f.Err = err
		return f
	}
	if len(data) <= dupCheckMax {
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

// ParseFrames decodes frames in order.
func ParseFrames(raw []mcptest.Frame) []Frame {
	out := make([]Frame, len(raw))
	for i, f := range raw {
		out[i] = ParseFrame(f.Data)
	}
	return out
}

// Stream is one open SSE response: mcptest's reader (started by Start, so a
// test can hold a stalled reader), its frames decoded as the test consumes
// them. ID is the listen request id as raw JSON ("" for GET /mcp), which
// every frame's subscriptionId must equal.
type Stream struct {
	*mcptest.Stream // its Name labels failure messages
	ID              string

	mu   sync.Mutex
	seen map[string]bool // problems already reported
}

// first reports whether problem is seen on this stream for the first time.
func (s *Stream) first(problem string) bool {
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

// StreamClient is a client for streams: no overall timeout (each wait has
// its own deadline) and a connection per stream.
func StreamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

// OpenStream sends req and, if the answer is an event stream, returns it
// (not yet read; t.Cleanup closes it). Otherwise it returns the answer,
// finished and decoded. c nil is a client of the stream's own, closed with
// it. cancel ends req's context.
func OpenStream(t testing.TB, c *http.Client, req *http.Request, cancel context.CancelFunc, name string) (*Stream, *MCPResponse) {
	t.Helper()
	if c == nil {
		own := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		done := cancel
		c, cancel = own, func() { done(); own.CloseIdleConnections() }
	}
	st, res, err := mcptest.OpenSSE(c, req, cancel, name)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		r := DecodeMCP(t, res.Status, res.Header, res.Raw)
		return nil, &r
	}
	s := &Stream{Stream: st}
	t.Cleanup(s.Close)
	return s, nil
}

// ListenReq opens subscriptions/listen with request id id (raw JSON) and
// returns either the stream or the refusal. notifications is
// params.notifications (omitted when nil).
func (h *Harness) ListenReq(t testing.TB, c *http.Client, token, id string, notifications any, tasks bool) (*Stream, *MCPResponse) {
	t.Helper()
	params := map[string]any{}
	if notifications != nil {
		params["notifications"] = notifications
	}
	ctx, cancel := context.WithCancel(context.Background())
	var rid any = json.RawMessage(id)
	if id == "" {
		rid = mcptest.NoID // a listen sent as a notification, to see it refused
	}
	req, _, err := mcptest.New(nil, h.IngressURL("/mcp"), token, tasks, "").NewRequest(ctx,
		mcptest.Request{ID: rid, Method: "subscriptions/listen", Params: params})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, r := OpenStream(t, c, req, cancel, "listen "+id)
	if s != nil {
		s.ID = id
	}
	return s, r
}

// Listen opens a listen that must be answered with a stream, starts
// reading it and returns it with its acknowledged notifications.
func (h *Harness) Listen(t testing.TB, c *http.Client, token, id string, notifications any, tasks bool) (*Stream, map[string]json.RawMessage) {
	t.Helper()
	s, r := h.ListenReq(t, c, token, id, notifications, tasks)
	if s == nil {
		t.Fatalf("listen %s was refused: %d %s", id, r.Status, r.Raw)
	}
	s.Start()
	return s, s.Ack(t)
}

// LegacyGet opens GET /mcp as token with Accept accept ("" sends none);
// the stream comes back not yet read, a refusal as its decoded answer.
func (h *Harness) LegacyGet(t testing.TB, c *http.Client, token, accept string) (*Stream, *MCPResponse) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var opts []mcptest.ReqOpt
	if accept != "" {
		opts = append(opts, mcptest.WithHeader("Accept", accept))
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", h.IngressURL("/mcp"), token, nil, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return OpenStream(t, c, req, cancel, "GET /mcp")
}

// CancelListen sends notifications/cancelled naming requestID (raw JSON)
// as token and requires 202: the client's way to end a listen gracefully.
func (h *Harness) CancelListen(t testing.TB, token, requestID string) {
	t.Helper()
	r := h.MCP(token, false).Do(t, mcptest.Request{ID: mcptest.NoID, Method: "notifications/cancelled",
		Params: map[string]any{"requestId": json.RawMessage(requestID), "reason": "done"}, Timeout: FrameWait})
	if r.Status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: status %d, want 202; body %s", r.Status, r.Raw)
	}
}

// NextCtx returns the next unread frame, or an error when the stream ends
// or ctx does.
func (s *Stream) NextCtx(ctx context.Context) (Frame, error) {
	f, err := s.Stream.Next(ctx)
	if err != nil {
		return Frame{}, err
	}
	return ParseFrame(f.Data), nil
}

// Next returns the next frame, which must be JSON-RPC 2.0, or fails t
// after FrameWait.
func (s *Stream) Next(t testing.TB) Frame {
	t.Helper()
	f := ParseFrame(s.Wait(t, FrameWait).Data)
	if f.Err != nil {
		t.Fatalf("%s: frame is not JSON: %v: %s", s.Name, f.Err, f)
	}
	if f.Msg.JSONRPC != "2.0" {
		t.Fatalf("%s: frame without jsonrpc 2.0: %s", s.Name, f)
	}
	return f
}

// EndCtx waits for the stream to end and returns the frames not yet read.
func (s *Stream) EndCtx(ctx context.Context) ([]Frame, error) {
	rest, err := s.Stream.End(ctx)
	return ParseFrames(rest), err
}

// End waits (up to FrameWait) for the stream to end; it returns the unread frames.
func (s *Stream) End(t testing.TB) []Frame {
	t.Helper()
	return ParseFrames(s.WaitEnd(t, FrameWait))
}

// Ack reads the first frame and checks it is the acknowledgement for this
// listen; it returns params.notifications member by member.
func (s *Stream) Ack(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	f := s.Next(t)
	s.Check(t, f, mcptest.AckMethod)
	var n map[string]json.RawMessage
	if err := json.Unmarshal(f.Msg.Params["notifications"], &n); err != nil || n == nil {
		t.Fatalf("%s: acknowledgement without params.notifications object: %s", s.Name, f)
	}
	return n
}

// Check asserts a notification frame: JSON-RPC 2.0, the method, no id, no
// repeated keys, and (for a listen) _meta.subscriptionId equal to the listen
// request id byte for byte, so a number stays a number and a string a string;
// for GET /mcp no subscriptionId at all.
func (s *Stream) Check(t testing.TB, f Frame, method string) {
	t.Helper()
	if f.Err != nil {
		t.Fatalf("%s: frame is not JSON: %v: %s", s.Name, f.Err, f)
	}
	if f.Msg.JSONRPC != "2.0" || f.Msg.Method != method || f.Msg.ID != nil {
		t.Fatalf("%s: got %s, want a %s notification", s.Name, f, method)
	}
	// Each kind of problem is reported once per stream, or the log drowns.
	if len(f.Dups) > 0 && s.first("dup") {
		t.Errorf("%s: %s frame repeats keys %v in one object (a JSON decoder keeps only the last): %s", s.Name, method, f.Dups, f)
	}
	got := f.Meta()[mcptest.MetaSubscriptionID]
	if s.ID == "" {
		if got != nil && s.first("legacy-id") {
			t.Errorf("%s: a GET /mcp frame carries a subscriptionId: %s", s.Name, f)
		}
		return
	}
	if !bytes.Equal(CompactJSON(got), CompactJSON(json.RawMessage(s.ID))) && s.first("id "+method) {
		t.Errorf("%s: %s frame as a JSON decoder reads it has _meta[%q] = %s, want %s (same JSON type): %s",
			s.Name, method, mcptest.MetaSubscriptionID, got, s.ID, f)
	}
}

// ExpectRes reads the next frame and checks it is resources/updated for uri.
func (s *Stream) ExpectRes(t testing.TB, uri string) Frame {
	t.Helper()
	f := s.Next(t)
	s.Check(t, f, mcptest.ResourceMethod)
	if f.URI() != uri {
		t.Fatalf("%s: resources/updated for %q, want %q", s.Name, f.URI(), uri)
	}
	return f
}

// ExpectTask reads the next frame and checks it is notifications/tasks for
// taskID in status.
func (s *Stream) ExpectTask(t testing.TB, taskID, status string) Frame {
	t.Helper()
	f := s.Next(t)
	s.Check(t, f, mcptest.TaskMethod)
	if id, st, _ := f.Task(); id != taskID || st != status {
		t.Fatalf("%s: notifications/tasks for %s %s, want %s %s: %s", s.Name, id, st, taskID, status, f)
	}
	return f
}

// ExpectFinal checks the graceful end: the listen's own response with
// resultType complete and the subscriptionId, then the end of the stream.
func (s *Stream) ExpectFinal(t testing.TB) {
	t.Helper()
	s.CheckFinal(t, s.Next(t))
	if rest := s.End(t); len(rest) > 0 {
		t.Fatalf("%s: frames after the final result: %v", s.Name, rest)
	}
}

// CheckFinal checks f is this listen's final result: its id, resultType
// complete, nothing but resultType and _meta, the subscriptionId.
func (s *Stream) CheckFinal(t testing.TB, f Frame) {
	t.Helper()
	if !f.IsFinal() || f.Msg.JSONRPC != "2.0" || f.Msg.Error != nil {
		t.Fatalf("%s: got %s, want the final result", s.Name, f)
	}
	if !bytes.Equal(CompactJSON(f.Msg.ID), CompactJSON(json.RawMessage(s.ID))) {
		t.Errorf("%s: final result id %s, want %s", s.Name, f.Msg.ID, s.ID)
	}
	res := f.Msg.Result
	if string(res["resultType"]) != `"complete"` {
		t.Errorf("%s: final resultType %s, want \"complete\"", s.Name, res["resultType"])
	}
	for k := range res {
		if k != "resultType" && k != "_meta" {
			t.Errorf("%s: final result has member %q; SubscriptionsListenResult has only resultType and _meta", s.Name, k)
		}
	}
	if got := f.Meta()[mcptest.MetaSubscriptionID]; !bytes.Equal(CompactJSON(got), CompactJSON(json.RawMessage(s.ID))) {
		t.Errorf("%s: final _meta[%q] = %s, want %s", s.Name, mcptest.MetaSubscriptionID, got, s.ID)
	}
	if len(f.Dups) > 0 {
		t.Errorf("%s: final result repeats keys %v", s.Name, f.Dups)
	}
}

// CompactJSON is raw without insignificant whitespace (raw itself when it
// is not JSON), so two encodings of one value compare equal.
func CompactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// DecodeStrings decodes an acknowledged list.
func DecodeStrings(t testing.TB, raw json.RawMessage) []string {
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

// ---- the document edited out of band, and a publication barrier ----

// EditFile replaces the file out of band, then makes the room notice with a
// workspace_status call through /mcp as token, and returns the version it
// reports. Contents must differ in length from the previous ones: the
// file's stamp (size, mtime, inode) is how the room notices an edit, and
// two writes within one clock tick keep the same mtime.
func (h *Harness) EditFile(t testing.TB, token, content string) int64 {
	t.Helper()
	before := h.StatusVersion(t, token)
	if err := os.WriteFile(h.Doc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	after := h.StatusVersion(t, token)
	if after != before+1 {
		t.Fatalf("the out-of-band edit made version %d, want %d", after, before+1)
	}
	return after
}

// StatusVersion is the document version workspace_status reports to token.
func (h *Harness) StatusVersion(t testing.TB, token string) int64 {
	t.Helper()
	st := h.MCP(token, false).ToolOK(t, "workspace_status", map[string]any{})
	v, ok := st["version"].(float64)
	if !ok {
		t.Fatalf("workspace_status has no version: %v", st)
	}
	return int64(v)
}

// Barrier proves that every change committed so far has reached the hub
// and been fanned out: the hub takes batches in commit order, so once a
// stream that follows only the document gets the frame of a new edit,
// everything committed before that edit was fanned out too. Without it, a
// listen opened right after a change may still be offered that change (the
// writer answers before it publishes), and a test of what a session's end
// dropped could look before the hub heard of the end.
type Barrier struct {
	h   *Harness
	tok string
	s   *Stream
}

// NewBarrier must be created before the test edits the document; it joins
// a reader of its own and listens on c.
func (h *Harness) NewBarrier(t testing.TB, c *http.Client) *Barrier {
	t.Helper()
	g := h.Join("barrier", "read")
	s, _ := h.Listen(t, c, g.SessionToken, `"barrier"`, map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
	return &Barrier{h: h, tok: g.SessionToken, s: s}
}

// Wait appends a character to the file, has the room record it, and waits
// for its frame.
func (b *Barrier) Wait(t testing.TB) {
	t.Helper()
	cur, err := os.ReadFile(b.h.Doc)
	if err != nil {
		t.Fatal(err)
	}
	b.h.EditFile(t, b.tok, string(cur)+".")
	b.s.ExpectRes(t, b.h.Eng.DocumentURI())
}
