package httpapi

// Helpers for the tests of the document's front doors: leases, proposals,
// review, commit and the remaining reads over HTTP and MCP, GET
// /workspace/observe, resources/updated on subscriptions/listen, and the
// discovery documents. Every name here starts with "dt" so it cannot collide
// with the other helper files of the package. Streams are mcptest's reader;
// nothing sleeps: every wait is on a frame or the end of a stream, bounded by
// a deadline.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// dtRegionGoals is the Goals region of harnessDoc, heading line through the
// end of the region (the blank line before the next heading included).
const dtRegionGoals = "## Goals\n\nship it\nsoon\n\n"

// dtRegionPlan is the Plan region of harnessDoc (it ends the file).
const dtRegionPlan = "## Plan\n\nstep one\nstep two\nstep three\n"

// dtRoom is a harness with the usual cast of sessions.
type dtRoom struct {
	h        *roomHarness
	author   sessionGrant // the agent default: read, observe, propose, checkout, commit
	other    sessionGrant // a second agent with the same grant
	reviewer sessionGrant // read, approve
	reader   sessionGrant // read only
}

func newDTRoom(t *testing.T) *dtRoom {
	t.Helper()
	h := newHarness(t, "")
	return &dtRoom{h: h,
		author:   h.session("author", azAgentCaps...),
		other:    h.session("other", azAgentCaps...),
		reviewer: h.session("reviewer", "read", "approve"),
		reader:   h.session("reader", "read"),
	}
}

// dtPost sends a JSON body to path on the ingress listener as token.
func dtPost(t testing.TB, h *roomHarness, token, path string, body any) apiResp {
	t.Helper()
	return h.doT(t, "POST", h.ingressURL(path), token, body)
}

// dtGet reads path (with its query) on the ingress listener as token.
func dtGet(t testing.TB, h *roomHarness, token, path string) apiResp {
	t.Helper()
	return h.doT(t, "GET", h.ingressURL(path), token, nil)
}

// dtOperator posts to the owner listener with the operator credential.
func dtOperator(t testing.TB, h *roomHarness, path string, body any) apiResp {
	t.Helper()
	return h.doT(t, "POST", h.ownerURL(path), h.OpToken, body)
}

// dtOK requires a 200 JSON object and returns it.
func dtOK(t testing.TB, r apiResp) map[string]any {
	t.Helper()
	wantOK(t, r)
	return r.JSON(t)
}

// dtList requires a 200 JSON array of objects and returns it.
func dtList(t testing.TB, r apiResp) []map[string]any {
	t.Helper()
	wantOK(t, r)
	var out []map[string]any
	r.Into(t, &out)
	return out
}

// dtCheckout leases target for token and returns the lease.
func dtCheckout(t testing.TB, h *roomHarness, token, target string) map[string]any {
	t.Helper()
	return dtOK(t, dtPost(t, h, token, "/workspace/checkout", map[string]any{"target": target}))
}

// dtProposeBody is a proposal replacing section (a selector; "" for the
// whole document) with content against base.
func dtProposeBody(base int64, section, content string) map[string]any {
	target := section
	if target == "" {
		target = "workspace"
	}
	change := map[string]any{"content": content}
	if section != "" {
		change["section"] = section
	}
	return map[string]any{"target": target, "base_version": base, "summary": "rewrite " + target, "change": change}
}

// dtPropose proposes and returns the proposal.
func dtPropose(t testing.TB, h *roomHarness, token string, base int64, section, content string) map[string]any {
	t.Helper()
	return dtOK(t, dtPost(t, h, token, "/workspace/propose", dtProposeBody(base, section, content)))
}

// dtReview reviews a proposal and returns the answer.
func dtReview(t testing.TB, h *roomHarness, token, proposalID string, approve bool) map[string]any {
	t.Helper()
	return dtOK(t, dtPost(t, h, token, "/workspace/proposal/review", map[string]any{"proposal_id": proposalID, "approve": approve}))
}

// dtApproved proposes as proposer and approves as reviewer; it returns the
// proposal id.
func dtApproved(t testing.TB, h *roomHarness, proposer, reviewer string, base int64, section, content string) string {
	t.Helper()
	id := dtStr(dtPropose(t, h, proposer, base, section, content)["proposal_id"])
	if id == "" {
		t.Fatal("propose answered no proposal_id")
	}
	if got := dtReview(t, h, reviewer, id, true); got["status"] != "approved" {
		t.Fatalf("review: %v", got)
	}
	return id
}

// dtCommit commits a proposal as token.
func dtCommit(t testing.TB, h *roomHarness, token, proposalID string) apiResp {
	t.Helper()
	return dtPost(t, h, token, "/workspace/commit", map[string]any{"proposal_id": proposalID})
}

// dtVersion is the newest version in the sidecar.
func dtVersion(t testing.TB, h *roomHarness) int64 {
	t.Helper()
	return int64(h.count(`SELECT max(version) FROM versions`))
}

// dtFile is the document's text on disk.
func dtFile(t testing.TB, h *roomHarness) string {
	t.Helper()
	b, err := os.ReadFile(h.Doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dtProposalStatus reads a proposal's status from the sidecar.
func dtProposalStatus(t testing.TB, h *roomHarness, id string) string {
	t.Helper()
	var s string
	if err := h.Store.Reader.QueryRow(`SELECT status FROM proposals WHERE proposal_id = ?`, id).Scan(&s); err != nil {
		t.Fatalf("proposal %s: %v", id, err)
	}
	return s
}

// dtMaxEvent is the newest event id in the sidecar (0 when empty).
func dtMaxEvent(t testing.TB, h *roomHarness) int64 {
	t.Helper()
	return int64(h.count(`SELECT coalesce(max(event_id), 0) FROM events`))
}

func dtStr(v any) string {
	s, _ := v.(string)
	return s
}

// dtNum reads a decoded JSON number (-1 when v is not one).
func dtNum(v any) int64 {
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

// dtFrame is one SSE event: a JSON-RPC notification or response.
type dtFrame struct {
	Raw     string
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	ID      json.RawMessage `json:"id"`
	Params  map[string]any  `json:"params"`
	Result  map[string]any  `json:"result"`
	Err     error           `json:"-"` // the data is not a JSON object
}

// eventID is params.event_id of a notifications/commonroom/event frame.
func (f dtFrame) eventID() int64 { return dtNum(f.Params["event_id"]) }

// eventType is params.event_type of a notifications/commonroom/event frame.
func (f dtFrame) eventType() string { return dtStr(f.Params["event_type"]) }

// dtStream is one open SSE response (mcptest's reader, already reading).
type dtStream struct {
	*mcptest.Stream
	name string
}

// dtOpen sends req on a client of its own (no overall timeout: each wait has
// its deadline). An answer that is not a 200 event stream is returned read
// and finished; otherwise the stream, already being read.
func dtOpen(t testing.TB, req *http.Request, cancel context.CancelFunc, name string) (*dtStream, apiResp) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	st, r, err := mcptest.OpenSSE(c, req, func() { cancel(); c.CloseIdleConnections() }, name)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		c.CloseIdleConnections()
		return nil, apiResp{Status: r.Status, Header: r.Header, Body: r.Raw}
	}
	s := &dtStream{Stream: st, name: name}
	s.Start()
	t.Cleanup(s.close)
	return s, apiResp{Status: r.Status, Header: r.Header}
}

// next returns the next frame; it fails t when none arrives within lsWait
// or the stream ends first.
func (s *dtStream) next(t testing.TB) dtFrame {
	t.Helper()
	data := s.Wait(t, lsWait).Data
	f := dtFrame{Raw: string(data)}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: frame is not a JSON object: %v: %.300s", s.name, err, f.Raw)
	}
	if f.JSONRPC != "2.0" {
		t.Fatalf("%s: frame without jsonrpc 2.0: %.300s", s.name, f.Raw)
	}
	return f
}

// close abandons the stream from the client side; it is idempotent.
func (s *dtStream) close() { s.Close() }

// dtObserve opens GET /workspace/observe?query as token.
func dtObserve(t testing.TB, h *roomHarness, token, query string) (*dtStream, apiResp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := h.ingressURL("/workspace/observe")
	if query != "" {
		url += "?" + query
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", url, token, nil, withHeader("Accept", "text/event-stream"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return dtOpen(t, req, cancel, "observe "+query)
}

// dtListen opens subscriptions/listen for uris as token with request id id,
// requires an event stream, and returns it with the acknowledged URIs.
func dtListen(t testing.TB, h *roomHarness, token string, id int, uris []string) (*dtStream, []string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	ctx, cancel := context.WithCancel(context.Background())
	req, _, err := mcptest.New(c, h.ingressURL("/mcp"), token, false, "").NewRequest(ctx, mcptest.Request{ID: id,
		Method: "subscriptions/listen", Params: map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, r := dtOpen(t, req, cancel, "listen")
	if s == nil {
		t.Fatalf("listen was refused: %d %s", r.Status, r.Body)
	}
	ack := s.next(t)
	if ack.Method != mcptest.AckMethod {
		t.Fatalf("first listen frame is %.300s, want the acknowledgement", ack.Raw)
	}
	got := mtStrings(mtGet(ack.Params, "notifications", "resourceSubscriptions"))
	return s, got
}
