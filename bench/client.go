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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

const (
	protocolVersion = mcptest.Version
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

func sessionOf(s mcptest.Session) session {
	return session{Token: s.SessionToken, Ref: s.SessionRef, ParticipantID: s.ParticipantID}
}

// join is POST {ingress}/session/join: the way an agent enters a room.
func join(ctx context.Context, hc *http.Client, ingressURL, invite, name string) (session, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := mcptest.Join(ctx, hc, ingressURL, invite, name, "agent")
	return sessionOf(s), err
}

// joinMany joins n sessions on one invitation, a few at a time.
func joinMany(ctx context.Context, hc *http.Client, ingressURL, invite, prefix string, n int) ([]session, error) {
	ss, err := mcptest.JoinMany(ctx, hc, ingressURL, invite, strings.ReplaceAll(prefix, "%", "%%")+"-%d", "agent", n)
	if err != nil {
		return nil, err
	}
	out := make([]session, len(ss))
	for i, s := range ss {
		out[i] = sessionOf(s)
	}
	return out, nil
}

// mcpClient is mcptest's client (the one the tests use) as one session,
// the Tasks extension declared so task handles come back; each request is
// bounded by requestTimeout.
type mcpClient struct{ mc *mcptest.Client }

func newMCP(hc *http.Client, url, token string) *mcpClient {
	return &mcpClient{mc: mcptest.New(hc, url, token, true, "ce-bench")}
}

// encodeRequest builds the JSON-RPC body a raw-connection listen sends,
// with the same _meta as every other request of the bench.
func encodeRequest(id int64, method string, params map[string]any) []byte {
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = requestMeta
	b, _ := mcptest.Envelope(strconv.AppendInt(nil, id, 10), method, p)
	return b
}

// requestMeta is params._meta of a raw-connection listen.
var requestMeta = mcptest.Meta(protocolVersion, mcptest.Caps(true), "ce-bench")

// rpcError is a JSON-RPC error or an HTTP failure on /mcp: always a fault.
type rpcError = mcptest.RPCError

// call sends one request and returns its result; anything but HTTP 200 with
// a result is an *rpcError (or a transport error).
func (c *mcpClient) call(ctx context.Context, method, _ string, params map[string]any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.Call(ctx, method, params)
}

// toolResult is a CallToolResult or, for handoff_create with the Tasks
// extension, a CreateTaskResult.
type toolResult = mcptest.ToolResult

// toolError is an isError result: a domain failure the server reported.
type toolError = mcptest.ToolError

// tool calls a tool. An isError result comes back as a *toolError together
// with the decoded result, so the one expected refusal (limit_exceeded on
// create) can be told from the rest.
func (c *mcpClient) tool(ctx context.Context, name string, args map[string]any) (toolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.Tool(ctx, name, args)
}

// taskState is what the bench reads back from tasks/get.
type taskState = mcptest.TaskState

func (c *mcpClient) taskGet(ctx context.Context, taskID string) (taskState, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.TaskGet(ctx, taskID)
}

func (c *mcpClient) taskCancel(ctx context.Context, taskID string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.TaskCancel(ctx, taskID)
}

// taskAnswer answers one outstanding input request with tasks/update.
func (c *mcpClient) taskAnswer(ctx context.Context, taskID, key string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.TaskAnswer(ctx, taskID, key, "yes")
}

// handoff is a created handoff and its task.
type handoff = mcptest.Handoff

// createHandoff is handoff_create with the Tasks extension: the answer is a
// task handle whose _meta names the handoff.
func (c *mcpClient) createHandoff(ctx context.Context, summary, assignee string) (handoff, error) {
	args := map[string]any{"summary": summary}
	if assignee != "" {
		args["assignee"] = assignee
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.mc.CreateHandoff(ctx, args)
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
