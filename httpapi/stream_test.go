package httpapi

// Frames and streams: mcptest's SSE reader seen the way these tests read it,
// each frame decoded once as a JSON-RPC message (frame) and checked against
// the rules of the stream it came on (subscriptions/listen, the legacy GET
// /mcp stream, GET /workspace/observe). Also the publication barrier and the
// helpers for many streams at once. Nothing here sleeps: every wait is on a
// frame, the end of a stream, or a context deadline.

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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// frameWait bounds every wait for a frame that must arrive.
const frameWait = 20 * time.Second

// ---- a publication barrier ----

// barrier proves that every change committed so far has reached the hub
// and been fanned out: the hub takes batches in commit order, so once a
// stream that follows only the document gets the frame of a new edit,
// everything committed before that edit was fanned out too. Without it, a
// listen opened right after a change may still be offered that change (the
// writer answers before it publishes; see TestListenReconnect…), which would
// make the tests that are not about that window flaky.
type barrier struct {
	h   *roomHarness
	tok string
	s   *stream
}

// newBarrier must be created before the test edits the document.
func newBarrier(t testing.TB, h *roomHarness, c *http.Client) *barrier {
	t.Helper()
	g := h.join("barrier", "read")
	s, _ := h.listen(t, c, g.SessionToken, `"barrier"`, map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
	return &barrier{h: h, tok: g.SessionToken, s: s}
}

// wait appends a character to the file, has the room record it, and waits
// for its frame.
func (b *barrier) wait(t testing.TB) {
	t.Helper()
	cur, err := os.ReadFile(b.h.Doc)
	if err != nil {
		t.Fatal(err)
	}
	b.h.editFile(t, b.tok, string(cur)+".")
	b.s.expectRes(t, b.h.Eng.DocumentURI())
}

// ---- SSE streams ----

// sameTask checks that a notifications/tasks frame's params, without
// _meta.subscriptionId, equal a tasks/get result without resultType and
// _meta.serverInfo.
func sameTask(t testing.TB, f frame, get map[string]any) {
	t.Helper()
	params := map[string]any{}
	for k, v := range f.Msg.Params {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatalf("frame params.%s: %v", k, err)
		}
		params[k] = x
	}
	params = withoutMeta(params, mcptest.MetaSubscriptionID)
	want := withoutMeta(get, mcptest.MetaServerInfo)
	delete(want, "resultType")
	if !reflect.DeepEqual(params, want) {
		a, _ := json.Marshal(params)
		b, _ := json.Marshal(want)
		t.Fatalf("notifications/tasks params differ from tasks/get:\n frame:     %s\n tasks/get: %s", a, b)
	}
}

// withoutMeta copies m without _meta[key], dropping _meta when it empties.
func withoutMeta(m map[string]any, key string) map[string]any {
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

// frame is one SSE event's data (a JSON-RPC notification or response),
// decoded once as the test consumes it.
type frame struct {
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

func (f frame) String() string {
	if len(f.Data) > 300 {
		return string(f.Data[:300]) + "…"
	}
	return string(f.Data)
}

// IsFinal reports a response (the listen's final result) rather than a notification.
func (f frame) IsFinal() bool {
	return f.Msg.Method == "" && (f.Msg.Result != nil || f.Msg.Error != nil)
}

// Meta is params._meta (or result._meta) member by member, as a generic
// JSON decoder (JSON.parse, a map in Go) reads it: when a key is repeated,
// the last one wins.
func (f frame) Meta() map[string]json.RawMessage { return f.meta }

// URI is params.uri of a resources/updated frame.
func (f frame) URI() string { return f.uri }

// Task is the task id, status and outstanding input keys of a
// notifications/tasks frame.
func (f frame) Task() (id, status string, inputKeys []string) {
	return f.taskID, f.status, f.inputKeys
}

// params is params decoded into generic values (nil when absent).
func (f frame) params() map[string]any {
	out := map[string]any{}
	for k, v := range f.Msg.Params {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil
		}
		out[k] = x
	}
	if f.Msg.Params == nil {
		return nil
	}
	return out
}

// eventID is params.event_id of a notifications/commonroom/event frame.
func (f frame) eventID() int64 { return num(f.params()["event_id"]) }

// eventType is params.event_type of a notifications/commonroom/event frame.
func (f frame) eventType() string { return str(f.params()["event_type"]) }

// dupCheckMax bounds the frames searched for repeated keys: the search is
// a token walk, slow on the megabytes the stalled-reader test pushes, and
// the small frames of every other test cover the same encoder.
const dupCheckMax = 64 << 10

// parseFrame decodes one event's data (params and result member by
// member, so the bulk is scanned as few times as possible) and looks for
// duplicate keys, which a JSON decoder silently resolves to the last one.
func parseFrame(data []byte) frame {
	f := frame{Data: data}
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

// stream is one open SSE response (mcptest's reader, started by read);
// frames are decoded as the test consumes them.
type stream struct {
	*mcptest.Stream        // its Name labels failure messages
	id              string // the listen request id as raw JSON ("" for GET /mcp)

	mu   sync.Mutex
	seen map[string]bool // problems already reported
}

// first reports whether problem is seen on this stream for the first time.
func (s *stream) first(problem string) bool {
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

// streamClient is a client for streams: no overall timeout (each wait has its
// own deadline) and a connection per stream.
func streamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

// openStream sends req and, if the answer is an event stream, returns it
// (not yet read). Otherwise it returns the answer, finished and decoded.
// c nil is a client of the stream's own (no overall timeout: each wait has
// its deadline), closed with it.
func openStream(t testing.TB, c *http.Client, req *http.Request, cancel context.CancelFunc, name string) (*stream, *mcpResp) {
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
		r := decodeMCP(t, res.Status, res.Header, res.Raw)
		return nil, &r
	}
	s := &stream{Stream: st}
	t.Cleanup(s.close)
	return s, nil
}

// listenReq opens subscriptions/listen and returns either the stream or the
// refusal. notifications is params.notifications (omitted when nil).
func (h *roomHarness) listenReq(t testing.TB, c *http.Client, token, id string, notifications any, tasks bool) (*stream, *mcpResp) {
	t.Helper()
	params := map[string]any{}
	if notifications != nil {
		params["notifications"] = notifications
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := mcpRequest(ctx, t, h.IngressURL("/mcp"), id, "subscriptions/listen", params, tasks, withBearer(token))
	s, r := openStream(t, c, req, cancel, "listen "+id)
	if s != nil {
		s.id = id
	}
	return s, r
}

// listen opens a listen that must be answered with a stream, starts
// reading it and returns it with its acknowledged notifications.
func (h *roomHarness) listen(t testing.TB, c *http.Client, token, id string, notifications any, tasks bool) (*stream, map[string]json.RawMessage) {
	t.Helper()
	s, r := h.listenReq(t, c, token, id, notifications, tasks)
	if s == nil {
		t.Fatalf("listen %s was refused: %d %s", id, r.Status, r.Raw)
	}
	s.read()
	return s, s.ack(t)
}

// legacyGet opens GET /mcp with a bearer session.
func (h *roomHarness) legacyGet(t testing.TB, c *http.Client, token, accept string) (*stream, *mcpResp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var opts []reqOpt
	if accept != "" {
		opts = append(opts, withHeader("Accept", accept))
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", h.IngressURL("/mcp"), token, nil, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return openStream(t, c, req, cancel, "GET /mcp")
}

// observe opens GET /workspace/observe?query as token and starts reading
// it; a refusal comes back as the plain answer it is.
func (h *roomHarness) observe(t testing.TB, token, query string) (*stream, apiResp) {
	t.Helper()
	return h.observeAt(t, h.IngressURL("/workspace/observe"), token, query, "observe "+query)
}

// observeAt is observe on url (either listener), as token ("" for none),
// with opts added to the request.
func (h *roomHarness) observeAt(t testing.TB, url, token, query, name string, opts ...reqOpt) (*stream, apiResp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if query != "" {
		url += "?" + query
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", url, token, nil, append(opts, withHeader("Accept", "text/event-stream"))...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, r := openStream(t, nil, req, cancel, name)
	if s == nil {
		return nil, apiResp{Status: r.Status, Header: r.Header, Body: r.Raw}
	}
	s.read()
	return s, apiResp{Status: http.StatusOK, Header: s.Header}
}

// listenURIs is listen on a client of its own following only uris (request
// id id); it returns the stream with the acknowledged URIs.
func (h *roomHarness) listenURIs(t testing.TB, token string, id int, uris []string) (*stream, []string) {
	t.Helper()
	s, acked := h.listen(t, nil, token, strconv.Itoa(id), map[string]any{"resourceSubscriptions": uris}, false)
	return s, decodeStrings(t, acked["resourceSubscriptions"])
}

// read starts the reader goroutine. A test that wants a stalled reader opens
// a stream and does not call read until it wants to look.
func (s *stream) read() { s.Start() }

// nextCtx returns the next unread frame, or an error when the stream ends or
// ctx does.
func (s *stream) nextCtx(ctx context.Context) (frame, error) {
	f, err := s.Next(ctx)
	if err != nil {
		return frame{}, err
	}
	return parseFrame(f.Data), nil
}

// next returns the next frame or fails t after frameWait.
func (s *stream) next(t testing.TB) frame {
	t.Helper()
	f := parseFrame(s.Wait(t, frameWait).Data)
	if f.Err != nil {
		t.Fatalf("%s: frame is not JSON: %v: %s", s.Name, f.Err, f)
	}
	if f.Msg.JSONRPC != "2.0" {
		t.Fatalf("%s: frame without jsonrpc 2.0: %s", s.Name, f)
	}
	return f
}

// endCtx waits for the stream to end and returns the frames not yet read.
func (s *stream) endCtx(ctx context.Context) ([]frame, error) {
	rest, err := s.End(ctx)
	return parseFrames(rest), err
}

// end waits (up to frameWait) for the stream to end; it returns the unread frames.
func (s *stream) end(t testing.TB) []frame {
	t.Helper()
	return parseFrames(s.WaitEnd(t, frameWait))
}

// parseFrames decodes frames in order.
func parseFrames(raw []mcptest.Frame) []frame {
	out := make([]frame, len(raw))
	for i, f := range raw {
		out[i] = parseFrame(f.Data)
	}
	return out
}

// close abandons the stream from the client side. It is idempotent.
func (s *stream) close() { s.Close() }

// ack reads the first frame and checks it is the acknowledgement for this
// listen; it returns params.notifications member by member.
func (s *stream) ack(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.AckMethod)
	var p struct {
		Notifications map[string]json.RawMessage
	}
	if err := json.Unmarshal(f.Msg.Params["notifications"], &p.Notifications); err != nil || p.Notifications == nil {
		t.Fatalf("%s: acknowledgement without params.notifications object: %s", s.Name, f)
	}
	return p.Notifications
}

// check asserts a notification frame: JSON-RPC 2.0, the method, no id, no
// repeated keys, and (for a listen) _meta.subscriptionId equal to the listen
// request id byte for byte, so a number stays a number and a string a string;
// for GET /mcp no subscriptionId at all.
func (s *stream) check(t testing.TB, f frame, method string) {
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
	if s.id == "" {
		if got != nil && s.first("legacy-id") {
			t.Errorf("%s: a GET /mcp frame carries a subscriptionId: %s", s.Name, f)
		}
		return
	}
	if !bytes.Equal(compactJSON(got), compactJSON(json.RawMessage(s.id))) && s.first("id "+method) {
		t.Errorf("%s: %s frame as a JSON decoder reads it has _meta[%q] = %s, want %s (same JSON type): %s",
			s.Name, method, mcptest.MetaSubscriptionID, got, s.id, f)
	}
}

// expect reads the next frame and checks it is method (and for resources,
// about uri; for tasks, about task id and status).
func (s *stream) expectRes(t testing.TB, uri string) frame {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.ResourceMethod)
	if f.URI() != uri {
		t.Fatalf("%s: resources/updated for %q, want %q", s.Name, f.URI(), uri)
	}
	return f
}

func (s *stream) expectTask(t testing.TB, taskID, status string) frame {
	t.Helper()
	f := s.next(t)
	s.check(t, f, mcptest.TaskMethod)
	if id, st, _ := f.Task(); id != taskID || st != status {
		t.Fatalf("%s: notifications/tasks for %s %s, want %s %s: %s", s.Name, id, st, taskID, status, f)
	}
	return f
}

// expectFinal checks the graceful end: the listen's own response with
// resultType complete and the subscriptionId, then the end of the stream.
func (s *stream) expectFinal(t testing.TB) {
	t.Helper()
	f := s.next(t)
	checkFinal(t, s, f)
	if rest := s.end(t); len(rest) > 0 {
		t.Fatalf("%s: frames after the final result: %v", s.Name, rest)
	}
}

func checkFinal(t testing.TB, s *stream, f frame) {
	t.Helper()
	if !f.IsFinal() || f.Msg.JSONRPC != "2.0" || f.Msg.Error != nil {
		t.Fatalf("%s: got %s, want the final result", s.Name, f)
	}
	if !bytes.Equal(compactJSON(f.Msg.ID), compactJSON(json.RawMessage(s.id))) {
		t.Errorf("%s: final result id %s, want %s", s.Name, f.Msg.ID, s.id)
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
	if got := f.Meta()[mcptest.MetaSubscriptionID]; !bytes.Equal(compactJSON(got), compactJSON(json.RawMessage(s.id))) {
		t.Errorf("%s: final _meta[%q] = %s, want %s", s.Name, mcptest.MetaSubscriptionID, got, s.id)
	}
	if len(f.Dups) > 0 {
		t.Errorf("%s: final result repeats keys %v", s.Name, f.Dups)
	}
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// decodeStrings decodes an acknowledged list.
func decodeStrings(t testing.TB, raw json.RawMessage) []string {
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

// sameSet compares two lists as sets and rejects duplicates in got.
func sameSet(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w) && len(slices.Compact(slices.Clone(g))) == len(g)
}

// eachStream runs f for every stream concurrently, each with its own deadline,
// and fails t with every error.
func eachStream(t testing.TB, streams []*stream, f func(ctx context.Context, s *stream) error) {
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

// collectT lets helpers that call t.Fatal run on goroutines the test started:
// a fatal error is recorded and ends only that goroutine; report fails the
// test from its own goroutine.
type collectT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func collect(t testing.TB) *collectT { return &collectT{TB: t} }

func (e *collectT) Helper() {}

func (e *collectT) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *collectT) Error(args ...any) { e.Errorf("%s", fmt.Sprint(args...)) }
func (e *collectT) Fail()             { e.Errorf("failed") }
func (e *collectT) FailNow()          { e.Fail(); runtime.Goexit() }

func (e *collectT) Fatalf(format string, args ...any) {
	e.Errorf(format, args...)
	runtime.Goexit()
}

func (e *collectT) Fatal(args ...any) {
	e.Error(args...)
	runtime.Goexit()
}

func (e *collectT) Failed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs) > 0
}

// report fails t (from the test's goroutine) with what was collected.
func (e *collectT) report(t testing.TB) {
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
