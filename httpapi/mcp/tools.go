package mcp

import (
	"encoding/json"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/present"
	"maps"
	"slices"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/room"
)

// Tool is one entry of the static MCP tool catalog: a row of the
// operations table with its input schema rendered once. It is exported so
// that the front door's tests can walk the catalog as tools/list shows it.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Input is the JSON Schema of the arguments, generated from the row's
	// input type (ops.InputSchema) and kept as plain JSON values.
	Input    map[string]any
	ReadOnly bool
	// Op is the operations table row tools/call runs.
	Op ops.Op
	// numberFree is wirejson.NumberFree of the row's input type: its
	// arguments may be decoded by wirejson.DecodeValidArgs' short way.
	numberFree bool
	// uiMeta is the tool's _meta for a client that declared MCP Apps
	// ({"ui": {"resourceUri": …}}, and visibility for an app-only tool);
	// nil for a tool the board is not linked from.
	uiMeta map[string]any
	// app runs an app-only tool (nil for a row of the operations table).
	app func(s *Handler, c *call, args json.RawMessage) (any, error)
}

// taskHandle is a tool answer that becomes a CreateTaskResult.
type taskHandle struct {
	task room.DetailedTask
}

// Tools lists every tool; it is static for the life of the process.
// A schema that cannot be generated is a programming error every test that
// starts a server catches.
func Tools() []Tool {
	var tools []Tool
	for _, op := range ops.Tools() {
		schema, err := ops.InputSchema(op.Call.Input())
		if err != nil {
			panic(err)
		}
		b, err := json.Marshal(schema)
		if err != nil {
			panic(err)
		}
		var input map[string]any
		if err := json.Unmarshal(b, &input); err != nil {
			panic(err)
		}
		t := Tool{Name: op.Tool, Title: op.Title, Description: op.Description,
			Input: input, ReadOnly: !op.Call.Writes(), Op: op, numberFree: wirejson.NumberFree(op.Call.Input())}
		if slices.Contains(mcpapp.LinkedTools, op.Tool) {
			t.uiMeta = map[string]any{"ui": map[string]any{"resourceUri": mcpapp.BoardURI}}
		}
		tools = append(tools, t)
	}
	return tools
}

// handoffToolResult is handoff_create's answer on MCP: with the Tasks
// extension declared on the request, the task handle (a CreateTaskResult);
// without it, the handoff and its task_id.
func handoffToolResult(res room.CreateHandoffResult, tasks bool) any {
	if tasks && res.Task != nil && !res.TaskPurged {
		return taskHandle{task: *res.Task}
	}
	out := map[string]any{"handoff": res.Handoff, "task_id": res.Handoff.TaskID}
	if res.Replayed {
		out["replayed"] = true
	}
	if res.TaskPurged {
		out["task_purged"] = true
	}
	return out
}

// toolByName finds a tool of the catalog; app-only tools (the board's)
// exist only for a request that declared MCP Apps (ui): to anyone else
// their names are unknown tools.
func (h *Handler) toolByName(name string, ui bool) (Tool, bool) {
	for _, t := range h.tools {
		if t.Name == name {
			return t, true
		}
	}
	if ui {
		for _, t := range h.appTools {
			if t.Name == name {
				return t, true
			}
		}
	}
	return Tool{}, false
}

func (h *Handler) toolsList(c *call) (any, *rpc.Error) {
	var in struct {
		Cursor *string `json:"cursor"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if in.Cursor != nil && *in.Cursor != "" {
		return nil, rpc.InvalidParams("invalid cursor", nil)
	}
	tools := h.tools
	if c.req.Meta.UI {
		tools = slices.Concat(h.tools, h.appTools)
	}
	list := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		entry := map[string]any{
			"name": t.Name, "title": t.Title, "description": t.Description, "inputSchema": t.Input,
			"annotations": map[string]any{"title": t.Title, "readOnlyHint": t.ReadOnly, "openWorldHint": false},
		}
		if c.req.Meta.UI && t.uiMeta != nil {
			entry["_meta"] = t.uiMeta
		}
		list = append(list, entry)
	}
	return h.complete(cacheable(map[string]any{"tools": list}, 3_600_000, "public")), nil
}

// toolsCall is tools/call: decode the call, run the tool's operation,
// encode its answer.
func (h *Handler) toolsCall(c *call) (any, *rpc.Error) {
	name, args, e := h.decodeToolCall(c)
	if e != nil {
		return nil, e
	}
	t, ok := h.toolByName(name, c.req.Meta.UI)
	if !ok {
		c.tool = "other"
		return nil, rpc.InvalidParams("unknown tool: "+name, map[string]any{"name": name})
	}
	c.tool = t.Name
	var (
		out  any
		memo *actor.Memo
		err  error
	)
	if t.app != nil {
		out, err = t.app(h, c, args)
	} else {
		// The arguments are one valid JSON value: a slice of the body the
		// envelope checked with json.Valid. The decoder captures the two
		// values it needs (capturing t would move it to the heap).
		free := t.numberFree
		out, memo, err = t.Op.RunMemo(c.ctx, h.opEnv(), c.p, func(v any) error { return wirejson.DecodeValidArgs(args, v, free) })
	}
	if err != nil {
		return h.toolFailure(c, err)
	}
	return h.encodeToolAnswer(c, present.PresentResult(out), memo)
}

// decodeToolCall reads tools/call's params: the tool's name (interned when
// it is one of ours) and its arguments as sent. The members the envelope
// already split are read where they give what json.Unmarshal gives.
func (h *Handler) decodeToolCall(c *call) (string, json.RawMessage, *rpc.Error) {
	name, args, plain := c.req.Plain("name", "arguments")
	if plain {
		var n string
		if n, plain = rpc.PlainStringIn(name, h.toolNames); plain {
			return n, args, nil
		}
	}
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return "", nil, e
	}
	return in.Name, in.Arguments, nil
}

// encodeToolAnswer is a tool's answer (already in present's form) as the
// result tools/call sends: handoff_create's task handle for a client with
// the Tasks extension; a write's answer encoded with its response around
// it into a pooled frame; a kept answer (handoff_get until the next
// commit) encoded once for its memo.
func (h *Handler) encodeToolAnswer(c *call, out any, memo *actor.Memo) (any, *rpc.Error) {
	if res, ok := out.(room.CreateHandoffResult); ok {
		out = handoffToolResult(res, c.req.Meta.Tasks)
	}
	if th, ok := out.(taskHandle); ok {
		return h.createTaskResult(th.task), nil
	}
	if memo == nil {
		f, ok, err := h.frames.ToolResult(c.req.ID, h.metaJSON, out)
		if err != nil {
			return nil, h.rpcErrorOf(room.Internal(err))
		}
		if ok {
			return f, nil
		}
	}
	// The result depends on the answer and on this handler alone.
	res, err := h.memoized(memo, func() (rpc.Raw, error) { return h.toolResult(out) })
	if err != nil {
		return nil, h.rpcErrorOf(room.Internal(err))
	}
	return res, nil
}

// toolResult is a successful tool's answer as a result, with this door's
// serverInfo in its _meta.
func (h *Handler) toolResult(out any) (rpc.Raw, error) { return rpc.ToolResult(h.metaJSON, out) }

// toolFailure answers a tool that failed: a domain failure is a result
// with isError (the model reads it and corrects itself); an overload, an
// unavailable room or an internal fault is a JSON-RPC error.
func (h *Handler) toolFailure(c *call, err error) (any, *rpc.Error) {
	switch room.ErrorKind(err) {
	case room.KindOverloaded, room.KindUnavailable, room.KindInternal:
		return nil, h.rpcErrorOf(err)
	}
	c.errKind = wirejson.Kind(room.ErrorKind(err))
	c.toolError = true
	body := wirejson.ErrorBody(err)
	text, _ := json.Marshal(body)
	return h.complete(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(text)}},
		"structuredContent": body,
		"isError":           true,
	}), nil
}

// createTaskResult is the Tasks extension's answer to a tool call that
// created a task: the handle, never a result (spec §5.4).
func (h *Handler) createTaskResult(t room.DetailedTask) taskHandleResult {
	meta := make(map[string]any, len(t.Meta)+1)
	maps.Copy(meta, t.Meta)
	meta[serverInfoKey] = h.serverInfoValue() // the server's wins
	return taskHandleResult{Meta: meta, CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt,
		PollIntervalMs: t.PollIntervalMs, ResultType: "task", Status: t.Status, StatusMessage: t.StatusMessage,
		TaskID: t.TaskID, TTLMs: t.TTLMs}
}

// taskHandleResult is the task handle as it goes on the wire. Its fields are
// declared in sorted key order, so it encodes to the bytes the map it
// replaced did (TestTaskHandleIsTheMapEncoding) without a map per answer and
// the encoder's key sort: the handle's encoding was about a tenth of the
// MCP door's CPU per create (issue 17).
type taskHandleResult struct {
	Meta           map[string]any `json:"_meta"`
	CreatedAt      string         `json:"createdAt"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	PollIntervalMs int64          `json:"pollIntervalMs"`
	ResultType     string         `json:"resultType"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage,omitempty"`
	TaskID         string         `json:"taskId"`
	TTLMs          int64          `json:"ttlMs"`
}
