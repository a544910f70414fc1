// The go-sdk client (github.com/modelcontextprotocol/go-sdk/mcp, pinned in
// this module's go.mod) driving `ce mcp` over stdio through CommandTransport:
// three hosts, each launching its own `ce mcp` with its own state file, take
// a handoff through its whole lifecycle with tools only (create, accept,
// request input, handoff_answer, complete, approve by a participant with
// approve; a second handoff cancelled with handoff_cancel), and one of them
// follows the document with Subscribe + ResourceUpdatedHandler while the
// test edits the Markdown file from outside.
//
// It runs once per protocol era the SDK can speak: 2025-11-25 (the SDK's
// initialize handshake, which ce mcp answers itself) and 2026-07-28 (the
// SDK's default: server/discover, then per-request _meta). The older
// 2025-06-18 and 2025-03-26 are checked at connect.
//
// This is its own Go module so that the ce module's dependencies do not
// change; `go test ./...` at the repository root does not enter it. It is
// run by scripts/mcp-clients.sh, which starts the room and sets CE_BIN,
// CE_DOC, CE_STATE_DIR and CE_INVITE_{CREATOR,WORKER,APPROVER}.
package gosdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func env(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("%s is not set (run scripts/mcp-clients.sh)", k)
	}
	return v
}

// host is one MCP host: a go-sdk client with its own `ce mcp` process.
type host struct {
	name    string
	state   string
	session *mcp.ClientSession
	updated chan string   // URIs of notifications/resources/updated
	acked   chan struct{} // a notifications/subscriptions/acknowledged arrived

	mu   sync.Mutex
	wire []string // the last messages each way, for failure reports
}

func connect(t *testing.T, ctx context.Context, name, invite, version string) *host {
	t.Helper()
	h := &host{name: name, state: filepath.Join(env(t, "CE_STATE_DIR"), name+".json"), updated: make(chan string, 16), acked: make(chan struct{}, 1)}
	client := mcp.NewClient(&mcp.Implementation{Name: "ce-gosdk-" + name, Version: "1.0.0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case h.updated <- req.Params.URI:
			default:
			}
		},
	})
	args := []string{"mcp", invite, "--name", name, "--state", h.state}
	if os.Getenv("CE_MCP_CLIENTS_VERBOSE") != "" {
		args = append(args, "--log-level", "debug")
	}
	cmd := exec.Command(env(t, "CE_BIN"), args...)
	cmd.Stderr = os.Stderr
	t.Cleanup(func() {
		if t.Failed() {
			h.mu.Lock()
			t.Logf("%s: the last messages on the wire (-> to ce mcp, <- from it):\n%s", name, strings.Join(h.wire, "\n"))
			h.mu.Unlock()
		}
	})
	transport := &tap{inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, host: h}
	s, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s: connect (%s): %v", name, version, err)
	}
	h.session = s
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	})
	return h
}

// participant is the participant id the host's state file holds.
func (h *host) participant(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(h.state)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		ParticipantID string `json:"participant_id"`
	}
	if err := json.Unmarshal(b, &s); err != nil || !strings.HasPrefix(s.ParticipantID, "participant_") {
		t.Fatalf("%s: state file %s: %v %q", h.name, h.state, err, s.ParticipantID)
	}
	return s.ParticipantID
}

// call is tools/call through the SDK; a tool error fails the test. The
// structured content comes back decoded into out.
func (h *host) call(t *testing.T, ctx context.Context, tool string, args any, out any) {
	t.Helper()
	res, err := h.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %s: %v", h.name, tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s answered isError: %s", h.name, tool, text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: %s: no structuredContent: %s", h.name, tool, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: structuredContent %s: %v", h.name, tool, b, err)
		}
	}
	// The text block carries the same JSON (hosts that show only text).
	if got := text(res); !json.Valid([]byte(got)) {
		t.Errorf("%s: %s: the text content is not the JSON result: %q", h.name, tool, got)
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type handoff struct {
	HandoffID   string  `json:"handoff_id"`
	Status      string  `json:"status"`
	OwnerID     string  `json:"owner_id"`
	AssigneeID  *string `json:"assignee_id"`
	TaskID      string  `json:"task_id"`
	TaskStatus  *string `json:"task_status"`
	DecidedBy   *string `json:"decided_by"`
	CancelledBy *string `json:"cancelled_by"`
	Result      *struct {
		Text    string `json:"text"`
		IsError bool   `json:"is_error"`
	} `json:"result"`
	Inputs []struct {
		Key      string          `json:"key"`
		Status   string          `json:"status"`
		Response json.RawMessage `json:"response"`
	} `json:"inputs"`
}

func (h *host) get(t *testing.T, ctx context.Context, id string) handoff {
	t.Helper()
	var out handoff
	h.call(t, ctx, "handoff_get", map[string]any{"handoff_id": id}, &out)
	if out.HandoffID != id {
		t.Fatalf("%s: handoff_get %s answered %q", h.name, id, out.HandoffID)
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// editOutside rewrites the room's Markdown file the way an editor saves
// (a new file renamed over it), adding a line with marker.
func editOutside(t *testing.T, marker string) {
	t.Helper()
	doc := env(t, "CE_DOC")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	tmp := doc + ".edit"
	if err := os.WriteFile(tmp, append(b, []byte("\n"+marker+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, doc); err != nil {
		t.Fatal(err)
	}
}

var eras = []struct {
	name, version, want string
}{
	{"2025-11-25 (initialize)", "2025-11-25", "2025-11-25"},
	{"2026-07-28 (server/discover, the SDK's default)", "", "2026-07-28"},
}

// TestLifecycle: the whole handoff, once per era, each era with its own
// three participants (CE_INVITE_* hold one-use invitations; the second era
// reuses the same state files, so the same participants).
func TestLifecycle(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) { lifecycle(t, era.version, era.want) })
	}
}

func lifecycle(t *testing.T, version, want string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	label := "go-sdk(" + want + ")"

	creator := connect(t, ctx, "creator", env(t, "CE_INVITE_CREATOR"), version)
	worker := connect(t, ctx, "worker", env(t, "CE_INVITE_WORKER"), version)
	approver := connect(t, ctx, "approver", env(t, "CE_INVITE_APPROVER"), version)

	init := creator.session.InitializeResult()
	if init == nil || init.ProtocolVersion != want {
		t.Fatalf("negotiated %+v, want protocol version %s", init, want)
	}
	if init.ServerInfo == nil || init.ServerInfo.Name == "" {
		t.Errorf("no serverInfo: %+v", init)
	}
	caps := init.Capabilities
	if caps == nil || caps.Tools == nil || caps.Prompts == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Errorf("capabilities: want tools, prompts and resources{subscribe}: %+v", caps)
	}
	if want != "2026-07-28" && strings.TrimSpace(init.Instructions) == "" {
		t.Errorf("the initialize result carries no instructions")
	}

	// The SDK's own requests, each through its own result type. ping and
	// logging/setLevel are not in 2026-07-28 (the SDK still sends ping there,
	// without _meta, and the room refuses it), so only the older era asks.
	if want != "2026-07-28" {
		if err := creator.session.Ping(ctx, nil); err != nil {
			t.Errorf("ping: %v", err)
		}
		if err := creator.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Errorf("logging/setLevel: %v", err)
		}
	}
	prompts, err := creator.session.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) == 0 {
		t.Fatalf("prompts/list: %v %+v", err, prompts)
	}
	if p, err := creator.session.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompts.Prompts[0].Name}); err != nil || len(p.Messages) == 0 {
		t.Errorf("prompts/get %s: %v %+v", prompts.Prompts[0].Name, err, p)
	}
	if r, err := creator.session.ListResources(ctx, nil); err != nil || len(r.Resources) == 0 {
		t.Errorf("resources/list: %v %+v", err, r)
	}
	if r, err := creator.session.ListResourceTemplates(ctx, nil); err != nil || len(r.ResourceTemplates) == 0 {
		t.Errorf("resources/templates/list: %v %+v", err, r)
	}
	for _, h := range []*host{creator, worker, approver} {
		tools, err := h.session.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("%s: tools/list: %v", h.name, err)
		}
		names := map[string]bool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = true
		}
		for _, n := range []string{"handoff_create", "handoff_accept", "handoff_request_input", "handoff_answer", "handoff_complete", "handoff_approve", "handoff_cancel", "handoff_get"} {
			if !names[n] {
				t.Fatalf("%s: tools/list has no %s (%d tools)", h.name, n, len(tools.Tools))
			}
		}
	}
	workerID, approverID, creatorID := worker.participant(t), approver.participant(t), creator.participant(t)
	var status struct {
		WorkspaceID string `json:"workspace_id"`
	}
	creator.call(t, ctx, "workspace_status", map[string]any{}, &status)
	if !strings.HasPrefix(status.WorkspaceID, "workspace_") {
		t.Fatalf("workspace_status: %+v", status)
	}

	// The whole handoff, timed from create to the approval read back.
	start := time.Now()
	var created struct {
		Handoff handoff `json:"handoff"`
		TaskID  string  `json:"task_id"`
	}
	creator.call(t, ctx, "handoff_create", map[string]any{
		"summary": "write the plan (" + label + ")", "assignee": workerID,
		"idempotency_key": fmt.Sprintf("gosdk-%s-%d", want, time.Now().UnixNano()),
	}, &created)
	id := created.Handoff.HandoffID
	if !strings.HasPrefix(id, "handoff_") || !strings.HasPrefix(created.TaskID, "task_") || created.Handoff.TaskID != created.TaskID {
		t.Fatalf("handoff_create without the tasks extension answers the handoff and task_id: %+v", created)
	}
	if created.Handoff.Status != "open" || created.Handoff.OwnerID != creatorID {
		t.Fatalf("the new handoff: %+v", created.Handoff)
	}

	var accepted handoff
	worker.call(t, ctx, "handoff_accept", map[string]any{"handoff_id": id}, &accepted)
	if accepted.Status != "accepted" || str(accepted.AssigneeID) != workerID {
		t.Fatalf("handoff_accept: %+v", accepted)
	}

	worker.call(t, ctx, "handoff_request_input", map[string]any{
		"handoff_id": id,
		"requests":   []map[string]any{{"key": "venue", "message": "Which venue?"}},
	}, nil)
	if h := creator.get(t, ctx, id); str(h.TaskStatus) != "input_required" || len(h.Inputs) != 1 || h.Inputs[0].Key != "venue" || h.Inputs[0].Status != "open" {
		t.Fatalf("after handoff_request_input the owner sees: %+v", h)
	}

	answer := "the town hall, " + label
	creator.call(t, ctx, "handoff_answer", map[string]any{
		"handoff_id":      id,
		"input_responses": map[string]any{"venue": map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}},
	}, nil)
	h := worker.get(t, ctx, id)
	if str(h.TaskStatus) != "working" || len(h.Inputs) != 1 || h.Inputs[0].Status != "answered" {
		t.Fatalf("after handoff_answer the worker sees: %+v", h)
	}
	var resp struct {
		Action  string            `json:"action"`
		Content map[string]string `json:"content"`
	}
	if err := json.Unmarshal(h.Inputs[0].Response, &resp); err != nil || resp.Action != "accept" || resp.Content["answer"] != answer {
		t.Fatalf("the worker reads the answer %s (%v)", h.Inputs[0].Response, err)
	}

	var done handoff
	worker.call(t, ctx, "handoff_complete", map[string]any{
		"handoff_id": id, "result": map[string]any{"text": "the plan: " + answer, "artifacts": []any{}, "is_error": false},
	}, &done)
	if done.Status != "result_ready" {
		t.Fatalf("handoff_complete: %+v", done)
	}
	approver.call(t, ctx, "handoff_approve", map[string]any{"handoff_id": id}, nil)
	h = creator.get(t, ctx, id)
	elapsed := time.Since(start)
	if h.Status != "approved" || str(h.DecidedBy) != approverID || str(h.TaskStatus) != "completed" || h.Result == nil || h.Result.Text != "the plan: "+answer {
		t.Fatalf("after handoff_approve the owner reads: %+v", h)
	}
	fmt.Printf("lifecycle wall time: %s %d ms\n", label, elapsed.Milliseconds())

	// A second handoff, cancelled by its owner with the tool twin.
	var second struct {
		Handoff handoff `json:"handoff"`
	}
	creator.call(t, ctx, "handoff_create", map[string]any{"summary": "never mind (" + label + ")", "assignee": workerID}, &second)
	creator.call(t, ctx, "handoff_cancel", map[string]any{"handoff_id": second.Handoff.HandoffID}, nil)
	if h := worker.get(t, ctx, second.Handoff.HandoffID); h.Status != "cancelled" || str(h.TaskStatus) != "cancelled" || str(h.CancelledBy) != creatorID {
		t.Fatalf("after handoff_cancel the worker reads: %+v", h)
	}

	// A resource subscription sees an edit made to the file from outside.
	uri := "commonroom://workspace/" + status.WorkspaceID
	// Under 2025-11-25 Subscribe is resources/subscribe, which the bridge
	// turns into a listen of its own before it answers. Under 2026-07-28 the
	// SDK's Subscribe writes a subscriptions/listen and returns without
	// waiting for the room's acknowledgement (go-sdk v1.8.0,
	// callSubscriptionsListen), so the edit waits for the acknowledgement
	// seen on the wire: the room replays nothing from before a listen.
	subscribed := make(chan error, 1)
	go func() { subscribed <- worker.session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}) }()
	select {
	case err := <-subscribed:
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Subscribe has not returned within 20 s")
	}
	if want == "2026-07-28" {
		select {
		case <-worker.acked:
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/subscriptions/acknowledged within 10 s of Subscribe")
		}
	}
	marker := fmt.Sprintf("edited outside for %s at %d", label, time.Now().UnixNano())
	editOutside(t, marker)
	select {
	case got := <-worker.updated:
		if got != uri {
			t.Fatalf("notifications/resources/updated for %q, want %q", got, uri)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no notifications/resources/updated for %s within 20 s of the edit", uri)
	}
	read, err := worker.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(read.Contents) == 0 || !strings.Contains(read.Contents[0].Text, marker) {
		t.Fatalf("resources/read after the edit: %v %+v", err, read)
	}
	if err := worker.session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Errorf("unsubscribe: %v", err)
	}
}

// tap is the SDK's CommandTransport with a window on the wire: it keeps
// the last messages each way (printed when the test fails, so a refusal is
// reported with the bytes that caused it) and signals the room's
// notifications/subscriptions/acknowledged, which the SDK consumes without
// telling its caller.
type tap struct {
	inner mcp.Transport
	host  *host
}

type tapConn struct {
	mcp.Connection
	host *host
}

func (t *tap) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, host: t.host}, nil
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.host.record("<- ", m)
		if r, ok := m.(*jsonrpc.Request); ok && r.Method == "notifications/subscriptions/acknowledged" {
			select {
			case c.host.acked <- struct{}{}:
			default:
			}
		}
	}
	return m, err
}

func (c *tapConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.host.record("-> ", m)
	return c.Connection.Write(ctx, m)
}

func (h *host) record(dir string, m jsonrpc.Message) {
	b, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		b = []byte(err.Error())
	}
	if len(b) > 2000 {
		b = append(b[:2000:2000], "…"...)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wire = append(h.wire, dir+string(b))
	if len(h.wire) > 40 {
		h.wire = h.wire[len(h.wire)-40:]
	}
}

// TestOlderVersions: hosts on the SDK's older versions are answered with the
// version they asked for, and a tool call goes through.
func TestOlderVersions(t *testing.T) {
	for _, v := range []string{"2025-06-18", "2025-03-26"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := connect(t, ctx, "creator", env(t, "CE_INVITE_CREATOR"), v)
			if got := h.session.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("asked for %s, negotiated %s", v, got)
			}
			var status struct {
				WorkspaceID string `json:"workspace_id"`
			}
			h.call(t, ctx, "workspace_status", map[string]any{}, &status)
			if !strings.HasPrefix(status.WorkspaceID, "workspace_") {
				t.Fatalf("workspace_status: %+v", status)
			}
		})
	}
}
