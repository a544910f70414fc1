package httpapi

import (
	"context"
	"encoding/json"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// tool is one entry of the static MCP tool catalog. run calls the same
// engine method as the matching HTTP route.
type tool struct {
	Name        string
	Title       string
	Description string
	Input       map[string]any
	ReadOnly    bool
	run         func(s *Server, c *toolCall) (any, error)
}

// toolCall is what a tool handler gets: the caller, its arguments and
// whether this request declared the Tasks extension.
type toolCall struct {
	ctx   context.Context
	p     room.Principal
	args  json.RawMessage
	tasks bool
}

// taskHandle is a tool answer that becomes a CreateTaskResult.
type taskHandle struct {
	task room.DetailedTask
}

// Schema helpers keep the catalog readable.
func obj(props map[string]any, required ...string) map[string]any {
	m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func integer(desc string, minimum int) map[string]any {
	return map[string]any{"type": "integer", "description": desc, "minimum": minimum}
}
func boolean(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}
func array(desc string, items map[string]any) map[string]any {
	return map[string]any{"type": "array", "description": desc, "items": items}
}

var noArgs = map[string]any{"type": "object", "additionalProperties": false}

// readTool wraps a read method whose arguments decode into I.
func readTool[I any, O any](fn func(e *room.Engine, ctx context.Context, q room.Querier, p room.Principal, in I) (O, error)) func(s *Server, c *toolCall) (any, error) {
	return func(s *Server, c *toolCall) (any, error) {
		var in I
		if err := decodeArgs(c.args, &in); err != nil {
			return nil, err
		}
		return actor.Read(c.ctx, s.room, func(q room.Querier) (O, error) { return fn(s.eng, c.ctx, q, c.p, in) })
	}
}

// writeTool wraps a mutation whose arguments decode into I.
func writeTool[I any, O any](name string, fn func(e *room.Engine, tx *room.Tx, p room.Principal, in I) (O, error)) func(s *Server, c *toolCall) (any, error) {
	return func(s *Server, c *toolCall) (any, error) {
		var in I
		if err := decodeArgs(c.args, &in); err != nil {
			return nil, err
		}
		return actor.Do(c.ctx, s.room, name, func(tx *room.Tx) (O, error) { return fn(s.eng, tx, c.p, in) })
	}
}

// toolCatalog lists every tool; it is static for the life of the process.
func toolCatalog() []tool {
	tools := []tool{
		{Name: "workspace_status", Title: "Room status", ReadOnly: true, Input: noArgs,
			Description: "The room at a glance: workspace id, current version, counts of participants, leases and pending proposals, and the heading outline. Needs read.",
			run:         readTool((*room.Engine).Status)},
		{Name: "workspace_summary", Title: "Document summary", ReadOnly: true,
			Input: obj(map[string]any{
				"max_lines": integer("lines of excerpt (default 20)", 0),
				"max_bytes": integer("bytes of excerpt (default 2048)", 0),
				"max_depth": integer("deepest heading level in the outline", 0),
			}),
			Description: "The first ten outline entries and a bounded excerpt of the current version. Start here before reading sections. Needs read.",
			run:         readTool((*room.Engine).Summary)},
		{Name: "workspace_regions", Title: "Document regions", ReadOnly: true, Input: noArgs,
			Description: "Every heading of the current version with its level, line and path; a path or title is a selector for workspace_read and leases. Needs read.",
			run:         readTool((*room.Engine).Regions)},
		{Name: "workspace_read", Title: "Read the document", ReadOnly: true,
			Input: obj(map[string]any{
				"section":   str("a heading title or path (e.g. \"Plan/Risks\"); omit for the whole document"),
				"max_lines": integer("at most this many lines", 0),
				"max_bytes": integer("at most this many bytes (cut on a character boundary)", 0),
				"offset":    integer("start this many bytes into the section (a truncated answer's next_offset)", 0),
			}),
			Description: "Read one section (or the document) of the current version, bounded by lines then bytes (at most 1 MiB). A truncated answer carries next_offset: read again with offset=next_offset for the rest. The answer carries the version to propose against. Needs read.",
			run:         readTool((*room.Engine).Read)},
		{Name: "workspace_history", Title: "Room history", ReadOnly: true,
			Input: obj(map[string]any{
				"limit":          integer("how many events (default 50, at most 200)", 0),
				"since_event_id": integer("return events after this id, oldest first (recovery after a gap)", 0),
			}),
			Description: "Events from the room's ring (the newest 2,000): newest first, or ascending after since_event_id. oldest_event_id tells whether a gap fell off the ring. Needs read.",
			run:         readTool((*room.Engine).History)},
		{Name: "workspace_participants", Title: "Participants", ReadOnly: true, Input: noArgs,
			Description: "Who is in the room (people and agents that have not left), oldest first. Needs read.",
			run:         readTool((*room.Engine).Participants)},
		{Name: "workspace_invite", Title: "Create an invitation",
			Input: obj(map[string]any{
				"capabilities":       array("capabilities to grant (at most your own unless you are admin); leave it out for read, observe, propose, checkout, commit; an empty list is refused", str("read, observe, propose, checkout, commit, approve, invite, admin or *")),
				"target":             str("a region the invitation is meant for (recorded, not enforced)"),
				"expires_in_minutes": integer("minutes until it expires (default 60, at most 10080)", 1),
				"max_uses":           integer("how many joins it admits (default 1, 0 = unlimited)", 0),
				"max_live_sessions":  integer("live sessions its joiners may hold at once (default: the room's; only an admin may raise it)", 1),
			}),
			Description: "Create a commonroom://join/… invitation. The secret is shown only in this answer. Needs invite.",
			run:         writeTool("invite", (*room.Engine).CreateInvite)},
		{Name: "workspace_leave", Title: "Leave the room", Input: noArgs,
			Description: "End your participation: your sessions end and your leases are released. Handoffs you own or work on are not changed.",
			run:         writeTool("leave", (*room.Engine).Leave)},
	}
	tools = append(tools, documentTools()...)
	return append(tools, handoffTools()...)
}

func (s *Server) toolByName(name string) (tool, bool) {
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return tool{}, false
}

func (s *Server) mcpToolsList(c *mcpCall) (any, *rpcError) {
	var in struct {
		Cursor *string `json:"cursor"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if in.Cursor != nil && *in.Cursor != "" {
		return nil, invalidParams("invalid cursor", nil)
	}
	list := make([]map[string]any, 0, len(s.tools))
	for _, t := range s.tools {
		list = append(list, map[string]any{
			"name": t.Name, "title": t.Title, "description": t.Description, "inputSchema": t.Input,
			"annotations": map[string]any{"title": t.Title, "readOnlyHint": t.ReadOnly, "openWorldHint": false},
		})
	}
	return s.complete(cacheable(map[string]any{"tools": list}, 3_600_000, "public")), nil
}

func (s *Server) mcpToolsCall(c *mcpCall) (any, *rpcError) {
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	t, ok := s.toolByName(in.Name)
	if !ok {
		return nil, invalidParams("unknown tool: "+in.Name, map[string]any{"name": in.Name})
	}
	out, err := t.run(s, &toolCall{ctx: c.ctx, p: c.p, args: in.Arguments, tasks: c.req.Meta.Tasks})
	if err != nil {
		switch room.ErrorKind(err) {
		case room.KindOverloaded, room.KindUnavailable, room.KindInternal:
			return nil, s.rpcErrorOf(err)
		}
		body := ErrorBody(err)
		text, _ := json.Marshal(body)
		return s.complete(map[string]any{
			"content":           []map[string]any{{"type": "text", "text": string(text)}},
			"structuredContent": body,
			"isError":           true,
		}), nil
	}
	if h, ok := out.(taskHandle); ok {
		return s.createTaskResult(h.task), nil
	}
	text, err := json.Marshal(out)
	if err != nil {
		return nil, s.rpcErrorOf(room.Internal(err))
	}
	var structured any = out
	if len(text) > 0 && text[0] != '{' {
		structured = map[string]any{"result": out}
	}
	return s.complete(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(text)}},
		"structuredContent": structured,
		"isError":           false,
	}), nil
}

// createTaskResult is the Tasks extension's answer to a tool call that
// created a task: the handle, never a result (spec §5.4).
func (s *Server) createTaskResult(t room.DetailedTask) map[string]any {
	m := map[string]any{
		"resultType":     "task",
		"taskId":         t.TaskID,
		"status":         t.Status,
		"createdAt":      t.CreatedAt,
		"lastUpdatedAt":  t.LastUpdatedAt,
		"ttlMs":          t.TTLMs,
		"pollIntervalMs": t.PollIntervalMs,
	}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	meta := map[string]any{}
	for k, v := range t.Meta {
		meta[k] = v
	}
	for k, v := range s.serverInfo() {
		meta[k] = v
	}
	m["_meta"] = meta
	return m
}
