package mcp

import "strings"

// prompt is a real, static prompt a client may show its model: how to work
// in a Commonroom room. No fixtures: every prompt here teaches the product.
type prompt struct {
	Name, Title, Description string
	Args                     []promptArg
	render                   func(args map[string]string) string
}

type promptArg struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

func promptCatalog() []prompt {
	return []prompt{
		{Name: "commonroom_edit_workflow", Title: "Edit the shared document",
			Description: "How to change the room's Markdown file without overwriting anyone: read, lease, propose, wait for approval, commit.",
			Args:        []promptArg{{Name: "goal", Description: "what you want to change"}},
			render: func(a map[string]string) string {
				goal := a["goal"]
				if goal == "" {
					goal = "your change"
				}
				return "You are working in a Commonroom room: a Markdown file shared by people and agents. To make " + goal + ":\n" +
					"1. workspace_status, then workspace_summary to see the outline and the current version.\n" +
					"2. workspace_read one section (bounded with max_lines/max_bytes); note the version it returns.\n" +
					"3. workspace_checkout that section so others know you are on it (leases are advisory and expire).\n" +
					"4. workspace_propose the new text against the version you read (change.section names the section).\n" +
					"5. Wait until a human approves it (workspace_proposals), then workspace_commit the proposal id.\n" +
					"6. On stale_version, read the diff it returns and propose again; never resend the same body.\n" +
					"7. workspace_release your lease. After any gap, read workspace_history; never treat a stream as a cursor."
			}},
		{Name: "commonroom_handoff_workflow", Title: "Hand off or take on work",
			Description: "How handoffs and their tasks work: create, accept, ask for input, deliver, and how approval is separate.",
			Args:        []promptArg{{Name: "role", Description: "requester or worker"}},
			render: func(a map[string]string) string {
				var b strings.Builder
				b.WriteString("In a Commonroom room a handoff is work one participant asks another to do; its task is the execution record (MCP Tasks).\n")
				if a["role"] != "worker" {
					b.WriteString("As the requester: handoff_create with a summary (and an idempotency_key so a retry is safe). Declare the io.modelcontextprotocol/tasks extension to get a task handle; poll tasks/get at pollIntervalMs or follow it on subscriptions/listen with its taskId. Answer input requests with tasks/update. When the task completes the handoff is result_ready: someone with approve (not the worker) calls handoff_approve or handoff_reject. Cancel with tasks/cancel while it is still open or accepted.\n")
				}
				if a["role"] != "requester" {
					b.WriteString("As the worker: handoff_accept, then do the work. If you need a decision, handoff_request_input and read the answers with handoff_get. Deliver with handoff_complete (result.text, artifacts such as proposal ids); set is_error if you could not do it. A second completion does not replace the first.\n")
				}
				b.WriteString("The handoff (handoff_get) and tasks/get are the authority; after a gap read handoff_events.")
				return b.String()
			}},
	}
}

func (s *Handler) mcpPromptsList(c *mcpCall) (any, *rpcError) {
	if e := s.noCursor(c); e != nil {
		return nil, e
	}
	list := []map[string]any{}
	for _, p := range promptCatalog() {
		args := p.Args
		if args == nil {
			args = []promptArg{}
		}
		list = append(list, map[string]any{"name": p.Name, "title": p.Title, "description": p.Description, "arguments": args})
	}
	return s.complete(cacheable(map[string]any{"prompts": list}, 3_600_000, "public")), nil
}

func (s *Handler) mcpPromptsGet(c *mcpCall) (any, *rpcError) {
	var in struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	for _, p := range promptCatalog() {
		if p.Name == in.Name {
			return s.complete(map[string]any{
				"description": p.Description,
				"messages": []map[string]any{{"role": "user",
					"content": map[string]any{"type": "text", "text": p.render(in.Arguments)}}},
			}), nil
		}
	}
	return nil, invalidParams("unknown prompt: "+in.Name, map[string]any{"name": in.Name})
}
