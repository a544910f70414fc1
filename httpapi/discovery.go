package httpapi

import (
	_ "embed"
	"net/http"
)

//go:embed skill/SKILL.md
var skillText string

// operation is one row of the room's operations table: what /protocol and
// /.well-known/agent-workspace advertise. A test checks it against the router.
type operation struct {
	Name       string `json:"name"`
	HTTP       string `json:"http"`
	Capability string `json:"capability"`
}

var operations = []operation{
	{"session.join", "POST /session/join", "invitation"},
	{"status", "GET /workspace/status", "read"},
	{"summary", "GET /workspace/summary", "read"},
	{"regions", "GET /workspace/regions", "read"},
	{"read", "GET /workspace/read", "read"},
	{"diff", "GET /workspace/diff", "read"},
	{"changes_since", "GET /workspace/changes_since", "read"},
	{"history", "GET /workspace/history", "read"},
	{"participants", "GET /workspace/participants", "read"},
	{"leases", "GET /workspace/leases", "read"},
	{"proposals", "GET /workspace/proposals", "read"},
	{"proposal", "GET /workspace/proposal", "read"},
	{"diagnostics", "GET /workspace/diagnostics", "read"},
	{"room", "GET /workspace/room", "read"},
	{"observe", "GET /workspace/observe", "observe"},
	{"checkout", "POST /workspace/checkout", "checkout"},
	{"renew", "POST /workspace/renew", "checkout"},
	{"release", "POST /workspace/release", "checkout"},
	{"propose", "POST /workspace/propose", "propose"},
	{"proposal.review", "POST /workspace/proposal/review", "approve"},
	{"commit", "POST /workspace/commit", "commit (admin for raw content)"},
	{"invite", "POST /workspace/invite", "invite"},
	{"invites", "GET /workspace/invites", "invite"},
	{"invite.revoke", "POST /workspace/invite/revoke", "invite"},
	{"leave", "POST /workspace/leave", "session"},
	{"session.end", "POST /workspace/session/end", "admin"},
	{"handoff.create", "POST /workspace/handoff", "propose"},
	{"handoff.get", "GET /workspace/handoff", "read"},
	{"handoff.events", "GET /workspace/handoff/events", "read"},
	{"handoff.accept", "POST /workspace/handoff/accept", "checkout"},
	{"handoff.request_input", "POST /workspace/handoff/request_input", "checkout"},
	{"handoff.complete", "POST /workspace/handoff/complete", "checkout"},
	{"handoff.approve", "POST /workspace/handoff/approve", "approve"},
	{"handoff.reject", "POST /workspace/handoff/reject", "approve"},
	{"task.get", "GET /workspace/task", "task owner, assignee or admin"},
	{"task.update", "POST /workspace/task/update", "task owner or admin"},
	{"task.cancel", "POST /workspace/task/cancel", "task owner or admin"},
	{"participant.cancel_handoffs", "POST /workspace/participant/cancel_handoffs", "admin"},
	{"mcp", "POST /mcp", "session (server/discover is public)"},
	{"mcp.legacy_stream", "GET /mcp", "session + read"},
}

var errorCodes = []string{"unauthorized", "session_expired", "permission_denied", "invitation_expired",
	"invitation_revoked", "invitation_redeemed", "unsupported_version", "lease_conflict", "stale_version",
	"proposal_not_found", "proposal_conflict", "invalid_region", "version_not_found", "transport_unavailable",
	"limit_exceeded", "invalid_request", "handoff_not_found", "handoff_conflict", "task_not_found",
	"not_found", "overloaded", "unavailable", "internal"}

var workflow = []string{"join with an invitation", "status", "summary", "read one section (bounded)",
	"checkout the section", "propose against the version read", "wait for approval", "commit the proposal",
	"release the lease", "on stale_version read the diff and propose again"}

func (s *Server) wellKnown(w http.ResponseWriter, r *http.Request) {
	names := make([]string, len(operations))
	for i, op := range operations {
		names[i] = op.Name
	}
	sendJSON(w, http.StatusOK, map[string]any{
		"name": s.eng.Name, "protocol": "commonroom", "protocol_version": "1", "workspace_id": s.eng.WorkspaceID,
		"discovery": map[string]string{"protocol": "/protocol", "skills": "/skills", "skill": "/skills/commonroom",
			"join": "/session/join", "mcp": "/mcp"},
		"operations": names, "workflow": workflow, "errors": errorCodes,
	})
}

func (s *Server) protocol(w http.ResponseWriter, r *http.Request) {
	sendJSON(w, http.StatusOK, map[string]any{
		"protocol": "commonroom", "version": "1", "operations": operations, "errors": errorCodes, "workflow": workflow,
		"auth": map[string]string{"header": "Authorization: Bearer <session_token>", "join": "POST /session/join",
			"note": "a transport connection is not admission: join with an invitation, then present the session on every request"},
		"bounds": map[string]int{"max_bytes": int(s.limits.MaxBodyBytes), "max_lines": 0, "max_items": s.limits.MaxListItems,
			"max_change_bytes": s.limits.MaxChangeBytes},
		"mcp": map[string]any{"endpoint": "/mcp", "protocol_version": mcpProtocolVersion, "extensions": []string{tasksExtension}},
	})
}

func (s *Server) skills(w http.ResponseWriter, r *http.Request) {
	sendJSON(w, http.StatusOK, map[string]any{"skills": []map[string]string{{"name": "commonroom",
		"description": "Work in a Commonroom room without overwriting anyone, and hand work to each other.",
		"path":        "/skills/commonroom"}}})
}

func (s *Server) skill(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Write([]byte(skillText))
}
