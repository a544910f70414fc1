package mcp

import "github.com/commonroom/ce/httpapi/mcp/internal/rpc"

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

// The prompts name tools as the guide does, a call as `tool {field, …}`
// with the fields it needs; TestGuideNamesOnlyTheCatalog holds them,
// rendered for every role, against the tool catalog, as it holds SKILL.md
// and the discovery instructions.
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
					"1. `workspace_status`, then `workspace_summary` to see the outline and the current version.\n" +
					"2. `workspace_read {section}` one section (bounded with max_lines/max_bytes); note the version it returns.\n" +
					"3. `workspace_checkout {target}` that section so others know you are on it (leases are advisory and expire).\n" +
					"4. `workspace_propose {target, base_version, change.section, change.content}` against the version you read: target and change.section name the same section, change.content is its new text with the heading line. To replace the whole document instead, target \"workspace\" and leave change.section out (the proposal's scope is then \"document\").\n" +
					"5. Wait until a human approves it (`workspace_proposal {proposal_id}` shows its status), then `workspace_commit {proposal_id}`.\n" +
					"6. On stale_version, read the diff it returns and propose again; never resend the same body.\n" +
					"7. `workspace_release {lease_id}`. After any gap, read workspace_history; never treat a stream as a cursor."
			}},
		{Name: "commonroom_handoff_workflow", Title: "Hand off or take on work",
			Description: "How handoffs and their tasks work with tools alone: create, accept, ask for input, answer, deliver, approve, cancel, and when to poll.",
			Args:        []promptArg{{Name: "role", Description: "requester or worker"}},
			render: func(a map[string]string) string {
				var b strings.Builder
				b.WriteString("In a Commonroom room a handoff is work one participant asks another to do; its task is the execution record. Every step is a tool call.\n")
				if a["role"] != "worker" {
					b.WriteString("As the requester: `handoff_create {summary}` (add an idempotency_key so a retry is safe, and an assignee to address someone). " +
						"Poll `handoff_get {handoff_id}`, waiting poll_interval_ms milliseconds between reads while its task is live. " +
						"When task_status is input_required, the open questions are in inputs (status open): answer with `handoff_answer {handoff_id, input_responses}`, " +
						"input_responses mapping each question's key to {\"action\": \"accept\", \"content\": {\"answer\": \"...\"}}, and check answered_keys and ignored_keys. " +
						"When the handoff is result_ready, someone with approve who is not the worker calls `handoff_approve {handoff_id}` or `handoff_reject {handoff_id}`. " +
						"To stop it while it is open or accepted, `handoff_cancel {handoff_id}` (only its owner or an admin; a finished one stays as it is, cancelled: false). " +
						"With the Tasks extension declared, tasks/get, subscriptions/listen, tasks/update and tasks/cancel do the same.\n")
				}
				if a["role"] != "requester" {
					b.WriteString("As the worker: find work with `handoff_list {role}` (role open_to_accept), then `handoff_accept {handoff_id}` and do the work. " +
						"If you need a decision, `handoff_request_input {handoff_id, requests[].key, requests[].message}`, then poll `handoff_get {handoff_id}` every poll_interval_ms until inputs show the answers. " +
						"Deliver with `handoff_complete {handoff_id, result.text}` (result.artifacts such as proposal ids; result.is_error if you could not do it). A second completion does not replace the first.\n")
				}
				b.WriteString("The handoff (handoff_get) is the authority; after a gap read `handoff_events {handoff_id}`.")
				return b.String()
			}},
	}
}

func (h *Handler) promptsList(c *call) (any, *rpc.Error) {
	if e := h.noCursor(c); e != nil {
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
	return h.complete(cacheable(map[string]any{"prompts": list}, 3_600_000, "public")), nil
}

func (h *Handler) promptsGet(c *call) (any, *rpc.Error) {
	var in struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	for _, p := range promptCatalog() {
		if p.Name == in.Name {
			return h.complete(map[string]any{
				"description": p.Description,
				"messages": []map[string]any{{"role": "user",
					"content": map[string]any{"type": "text", "text": p.render(in.Arguments)}}},
			}), nil
		}
	}
	return nil, rpc.InvalidParams("unknown prompt: "+in.Name, map[string]any{"name": in.Name})
}
