package httpapi

// The httpapi tests' MCP client: the kit's (internal/roomtest) client over
// mcptest's, which builds requests the way a conforming client does and lets
// a test override any header, the _meta object or the raw body, on the
// harness's real listeners, with the answers recorded by the harness and
// decoded once; the kit checks the wire rules that hold for every response
// (id echo, resultType, serverInfo, repeated keys, JSON content type on
// errors). Here: this package's names for it, and the task helpers.

import (
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
)

// mcpReq is one request. Zero fields take the conforming default.
type mcpReq = mcptest.Request

// mcpResp is one answer on /mcp, decoded once (roomtest.MCPResponse).
type mcpResp = roomtest.MCPResponse

// mcpClient speaks MCP as one session: the kit's client, whose answers are
// recorded and checked, under this package's method names. The other fields
// are the ones tests have always read (mc: the unchecked mcptest client).
type mcpClient struct {
	*roomtest.MCP
	h     *roomHarness
	url   string
	token string
	mc    *mcptest.Client
}

// mcpClient is a client on the ingress listener for token ("" = none).
func newMCPClient(h *roomHarness, token string, tasks bool) *mcpClient {
	return wrapMCP(h, token, h.MCP(token, tasks))
}

func wrapMCP(h *roomHarness, token string, k *roomtest.MCP) *mcpClient {
	return &mcpClient{MCP: k, h: h, url: h.IngressURL("/mcp"), token: token, mc: k.Client()}
}

// withTasks is the same session declaring (or not) the Tasks extension.
func (c *mcpClient) withTasks(on bool) *mcpClient { return wrapMCP(c.h, c.token, c.WithTasks(on)) }

// do sends q and decodes the answer, checking the rules for every answer.
func (c *mcpClient) do(t testing.TB, q mcpReq) mcpResp { t.Helper(); return c.Do(t, q) }

// decodeMCP decodes an answer body when it is a JSON object.
var decodeMCP = roomtest.DecodeMCP

// call sends method with params the conforming way.
func (c *mcpClient) call(t testing.TB, method string, params map[string]any) mcpResp {
	t.Helper()
	return c.Call(t, method, params)
}

// ok sends method and requires HTTP 200 with a result.
func (c *mcpClient) ok(t testing.TB, method string, params map[string]any) map[string]any {
	t.Helper()
	return c.OK(t, method, params)
}

// wantResult requires HTTP 200 with a JSON-RPC result and returns it.
var wantResult = roomtest.WantResult

// wantRPCError requires the status and JSON-RPC error code and returns the
// error object.
var wantRPCError = roomtest.WantRPCError

// tool calls a tool; args nil sends no arguments member. It returns the result.
func (c *mcpClient) tool(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	return c.Tool(t, name, args)
}

// toolOK calls a tool that must succeed and returns its structuredContent.
func (c *mcpClient) toolOK(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	return c.ToolOK(t, name, args)
}

// toolErr calls a tool that must fail as a tool (isError) with Commonroom
// error code want, and returns structuredContent.
func (c *mcpClient) toolErr(t testing.TB, name string, args map[string]any, want string) map[string]any {
	t.Helper()
	return c.ToolErr(t, name, args, want)
}

// wantCaching checks a result's ttlMs and cacheScope.
var wantCaching = roomtest.WantCaching

// jsonText is v as compact JSON, for failure messages.
var jsonText = roomtest.JSONText

// checkTextBlock: content holds one text block whose text is the
// structuredContent as JSON.
var checkTextBlock = roomtest.CheckTextBlock

// taskCall sends a tasks/* method with taskId (Mcp-Name = taskId) and extra params.
func (c *mcpClient) taskCall(t testing.TB, method, taskID string, extra map[string]any) mcpResp {
	t.Helper()
	return c.TaskCall(t, method, taskID, extra)
}

// taskGet is tasks/get that must succeed; it returns the result.
func (c *mcpClient) taskGet(t testing.TB, taskID string) map[string]any {
	t.Helper()
	return c.TaskGet(t, taskID)
}

// wantAck checks an empty acknowledgement (tasks/update, tasks/cancel).
var wantAck = roomtest.WantAck

// createTask is handoff_create with the extension declared: it returns the
// task id and the handoff id from the CreateTaskResult.
func (c *mcpClient) createTask(t testing.TB, args map[string]any) (taskID, handoffID string) {
	t.Helper()
	return c.CreateTask(t, args)
}

// The kit's decoded-JSON helpers under the short names these tests use
// (the MCP door's tests use the same ones).
var (
	jsonAt    = roomtest.JSONAt
	hasKey    = roomtest.HasKey
	stringsOf = roomtest.StringsOf
	str       = roomtest.Str
	num       = roomtest.Num
	httpTwin  = roomtest.HTTPTwin
)

// tool is a tool of the door's catalog as tools/list shows it.
type tool = mcp.Tool

// toolCatalog is the MCP door's tool catalog.
func toolCatalog() []tool { return mcp.Tools() }

// ---- notifications and tasks ----

// rawID is a raw JSON id as mcptest sends it ("" for a notification).
func rawID(id string) any {
	if id == "" {
		return mcptest.NoID
	}
	return json.RawMessage(id)
}

// ---- tasks ----

// taskRef is a handoff and its task.
type taskRef struct{ HandoffID, TaskID string }

// newTask creates a handoff with the Tasks extension declared and
// returns the handle's ids.
func (h *roomHarness) newTask(t testing.TB, token, summary string) taskRef {
	t.Helper()
	tid, hid := newMCPClient(h, token, true).createTask(t, map[string]any{"summary": summary})
	return taskRef{HandoffID: hid, TaskID: tid}
}

func (h *roomHarness) acceptTask(t testing.TB, token string, x taskRef) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_accept", map[string]any{"handoff_id": x.HandoffID})
}

// askInput has the assignee ask the owner one question under key.
func (h *roomHarness) askInput(t testing.TB, token string, x taskRef, key, message string) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_request_input", map[string]any{"handoff_id": x.HandoffID,
		"requests": []any{map[string]any{"key": key, "message": message}}})

}

// answerInput has the owner answer key with tasks/update.
func (h *roomHarness) answerInput(t testing.TB, token string, x taskRef, key string) {
	t.Helper()
	res := newMCPClient(h, token,
		true).ok(t, "tasks/update", map[string]any{"taskId": x.TaskID, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"answer": "yes to " + key}}}})

	if res["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v", res)
	}
}

func (h *roomHarness) completeTask(t testing.TB, token string, x taskRef, text string) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_complete", map[string]any{"handoff_id": x.HandoffID, "result": map[string]any{"text": text}})
}

func (h *roomHarness) cancelTask(t testing.TB, token string, x taskRef) {
	t.Helper()
	wantAck(t, newMCPClient(h, token, true).taskCall(t, "tasks/cancel", x.TaskID, nil))
}

// getTask is tasks/get's result.
func (h *roomHarness) getTask(t testing.TB, token string, x taskRef) map[string]any {
	t.Helper()
	return newMCPClient(h, token, true).taskGet(t, x.TaskID)
}
