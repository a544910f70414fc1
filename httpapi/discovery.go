package httpapi

import (
	"github.com/commonroom/ce/httpapi/present"
	"net/http"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/httpapi/skill"
)

// skillText is the agent guide, the bytes the MCP door's skill resource
// serves too.
var skillText = skill.Text()

// operations is what /protocol and /.well-known/agent-workspace advertise:
// the operations table itself. A test checks it against the router.
var operations = ops.Table

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
		"mcp": map[string]any{"endpoint": "/mcp", "protocol_version": present.ProtocolVersion, "extensions": []string{present.TasksExtension}},
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
