package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	protocolVersion = "2026-07-28"
	tasksExtension  = "io.modelcontextprotocol/tasks"
	// requestTimeout bounds one request; a room that takes longer is broken,
	// not slow, and the bench must not hang on it.
	requestTimeout = 30 * time.Second
)

// newLoadClient is the HTTP client every request/response load uses, the
// trivial-handler baseline included, so that the baseline and the room pay
// the same client costs. Enough idle connections are kept that no worker
// ever waits for one or reconnects.
func newLoadClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

// postJSON sends one POST and returns the status and the whole body.
func postJSON(ctx context.Context, hc *http.Client, url string, hdr http.Header, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// faults collects every error that should not happen: a transport error, a
// non-200, a JSON-RPC error, an isError result the caller did not expect.
// Any fault fails the run; the first few are kept verbatim for the report.
type faults struct {
	mu      sync.Mutex
	byKind  map[string]int
	samples []string
}

func newFaults() *faults { return &faults{byKind: map[string]int{}} }

func (f *faults) add(kind, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byKind[kind]++
	if len(f.samples) < 10 {
		f.samples = append(f.samples, kind+": "+detail)
	}
}

func (f *faults) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.byKind {
		n += c
	}
	return n
}

func (f *faults) snapshot() (map[string]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.byKind))
	for k, v := range f.byKind {
		m[k] = v
	}
	return m, append([]string(nil), f.samples...)
}

// session is one joined participant's bearer session.
type session struct {
	Token         string `json:"session_token"`
	Ref           string `json:"session_ref"`
	ParticipantID string `json:"participant_id"`
}

// join is POST {ingress}/session/join: the way an agent enters a room.
func join(ctx context.Context, hc *http.Client, ingressURL, invite, name string) (session, error) {
	body, _ := json.Marshal(map[string]string{"invite": invite, "name": name, "kind": "agent"})
	status, b, err := postJSON(ctx, hc, ingressURL+"/session/join", nil, body)
	if err != nil {
		return session{}, err
	}
	if status != http.StatusOK {
		return session{}, fmt.Errorf("join: HTTP %d: %s", status, clip(b))
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" {
		return session{}, fmt.Errorf("join: unreadable answer: %s", clip(b))
	}
	return s, nil
}

// joinMany joins n sessions on one invitation, a few at a time.
func joinMany(ctx context.Context, hc *http.Client, ingressURL, invite, prefix string, n int) ([]session, error) {
	out := make([]session, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := join(ctx, hc, ingressURL, invite, fmt.Sprintf("%s-%d", prefix, i))
			if err != nil {
				errs <- err
				return
			}
			out[i] = s
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// mcpClient speaks MCP 2026-07-28 on POST /mcp as one session: the routing
// headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) and params._meta on
// every request, the Tasks extension declared so task handles come back.
type mcpClient struct {
	hc    *http.Client
	url   string
	token string
	hdr   http.Header // shared by every request of this client; never mutated after creation
	next  atomic.Int64
}

func newMCP(hc *http.Client, url, token string) *mcpClient {
	return &mcpClient{hc: hc, url: url, token: token, hdr: http.Header{
		"Authorization":        {"Bearer " + token},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {protocolVersion},
	}}
}

// requestMeta is params._meta: the version and, per request, the client's
// capabilities with the Tasks extension.
var requestMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    protocolVersion,
	"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}},
	"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "ce-bench", "version": "1"},
}

// rpcError is a JSON-RPC error or an HTTP failure on /mcp: always a fault.
type rpcError struct {
	Status  int
	Code    int
	Message string
	Body    string
}

func (e *rpcError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("HTTP %d, JSON-RPC %d %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body)
}

// encodeRequest builds the JSON-RPC body. params is copied so callers may
// reuse theirs.
func encodeRequest(id int64, method string, params map[string]any) []byte {
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = requestMeta
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	return b
}

// call sends one request and returns its result; anything but HTTP 200 with
// a result is an *rpcError (or a transport error).
func (c *mcpClient) call(ctx context.Context, method, name string, params map[string]any) (json.RawMessage, error) {
	body := encodeRequest(c.next.Add(1), method, params)
	hdr := make(http.Header, len(c.hdr)+2)
	for k, v := range c.hdr {
		hdr[k] = v
	}
	hdr["Mcp-Method"] = []string{method}
	if name != "" {
		hdr["Mcp-Name"] = []string{name}
	}
	status, b, err := postJSON(ctx, c.hc, c.url, hdr, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, name, err)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if jerr := json.Unmarshal(b, &env); jerr != nil {
		return nil, &rpcError{Status: status, Body: clip(b)}
	}
	if env.Error != nil {
		return nil, &rpcError{Status: status, Code: env.Error.Code, Message: env.Error.Message}
	}
	if status != http.StatusOK || env.Result == nil {
		return nil, &rpcError{Status: status, Body: clip(b)}
	}
	return env.Result, nil
}

// toolResult is a CallToolResult or, for handoff_create with the Tasks
// extension, a CreateTaskResult.
type toolResult struct {
	ResultType        string          `json:"resultType"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	TaskID            string          `json:"taskId"`
	Status            string          `json:"status"`
	Meta              struct {
		HandoffID string `json:"commonroom/handoff_id"`
	} `json:"_meta"`
}

// errorCode is the domain code of an isError result ("" otherwise).
func (r toolResult) errorCode() string {
	if !r.IsError {
		return ""
	}
	var b struct {
		Error string `json:"error"`
	}
	json.Unmarshal(r.StructuredContent, &b)
	return b.Error
}

// toolError is an isError result: a domain failure the server reported.
type toolError struct {
	Tool, Code, Body string
}

func (e *toolError) Error() string { return fmt.Sprintf("%s: isError %s: %s", e.Tool, e.Code, e.Body) }

// tool calls a tool. An isError result comes back as a *toolError together
// with the decoded result, so the one expected refusal (limit_exceeded on
// create) can be told from the rest.
func (c *mcpClient) tool(ctx context.Context, name string, args map[string]any) (toolResult, error) {
	raw, err := c.call(ctx, "tools/call", name, map[string]any{"name": name, "arguments": args})
	if err != nil {
		return toolResult{}, err
	}
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, &rpcError{Status: 200, Body: "undecodable tool result: " + clip(raw)}
	}
	if r.IsError {
		return r, &toolError{Tool: name, Code: r.errorCode(), Body: clip(r.StructuredContent)}
	}
	return r, nil
}

// taskState is what the bench reads back from tasks/get.
type taskState struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	PollIntervalMs int    `json:"pollIntervalMs"`
}

func (c *mcpClient) taskGet(ctx context.Context, taskID string) (taskState, error) {
	raw, err := c.call(ctx, "tasks/get", taskID, map[string]any{"taskId": taskID})
	if err != nil {
		return taskState{}, err
	}
	var t taskState
	if err := json.Unmarshal(raw, &t); err != nil || t.TaskID != taskID || t.Status == "" {
		return t, &rpcError{Status: 200, Body: "tasks/get answered something else: " + clip(raw)}
	}
	return t, nil
}

func (c *mcpClient) taskCancel(ctx context.Context, taskID string) error {
	_, err := c.call(ctx, "tasks/cancel", taskID, map[string]any{"taskId": taskID})
	return err
}

// taskAnswer answers one outstanding input request with tasks/update.
func (c *mcpClient) taskAnswer(ctx context.Context, taskID, key string) error {
	_, err := c.call(ctx, "tasks/update", taskID, map[string]any{"taskId": taskID,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}})
	return err
}

// handoff is a created handoff and its task.
type handoff struct {
	ID, TaskID string
}

// createHandoff is handoff_create with the Tasks extension: the answer is a
// task handle whose _meta names the handoff.
func (c *mcpClient) createHandoff(ctx context.Context, summary, assignee string) (handoff, error) {
	args := map[string]any{"summary": summary}
	if assignee != "" {
		args["assignee"] = assignee
	}
	r, err := c.tool(ctx, "handoff_create", args)
	if err != nil {
		return handoff{}, err
	}
	if r.ResultType != "task" || r.TaskID == "" || r.Meta.HandoffID == "" {
		return handoff{}, &rpcError{Status: 200, Body: fmt.Sprintf("handoff_create: not a task handle (resultType %q)", r.ResultType)}
	}
	return handoff{ID: r.Meta.HandoffID, TaskID: r.TaskID}, nil
}

func (c *mcpClient) handoffAction(ctx context.Context, tool, id string, extra map[string]any) error {
	args := map[string]any{"handoff_id": id}
	for k, v := range extra {
		args[k] = v
	}
	_, err := c.tool(ctx, tool, args)
	return err
}

var completeArgs = map[string]any{"result": map[string]any{"text": "done by the bench"}}

// errKind names an error for the fault table.
func errKind(err error) string {
	var re *rpcError
	var te *toolError
	switch {
	case errors.As(err, &re):
		if re.Code != 0 {
			return fmt.Sprintf("jsonrpc %d", re.Code)
		}
		return fmt.Sprintf("http %d", re.Status)
	case errors.As(err, &te):
		return te.Tool + " isError " + te.Code
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", requestTimeout)
	}
	return "transport"
}

// isLimitExceeded reports the one refusal the lifecycle expects: the room's
// 32-active-task cap answering handoff_create.
func isLimitExceeded(err error) bool {
	var te *toolError
	return errors.As(err, &te) && te.Tool == "handoff_create" && te.Code == "limit_exceeded"
}
