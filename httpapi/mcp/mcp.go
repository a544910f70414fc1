package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/room"
)

// mcpMethod is one row of the MCP method table: what the envelope decoder
// needs (the params field Mcp-Name must equal) and the handler dispatch
// calls.
type mcpMethod struct {
	methodInfo
	run func(s *Handler, c *mcpCall) (any, *rpcError)
}

// mcpMethods are the methods POST /mcp serves. initialize, ping,
// logging/setLevel, tasks/list and tasks/result are absent on purpose: they
// answer 404 -32601.
var mcpMethods = map[string]mcpMethod{
	"server/discover":          {run: func(s *Handler, _ *mcpCall) (any, *rpcError) { return s.mcpDiscover(), nil }},
	"tools/list":               {run: (*Handler).mcpToolsList},
	"tools/call":               {methodInfo{NameField: "name"}, (*Handler).mcpToolsCall},
	"resources/list":           {run: (*Handler).mcpResourcesList},
	"resources/templates/list": {run: (*Handler).mcpTemplatesList},
	"resources/read":           {methodInfo{NameField: "uri"}, (*Handler).mcpResourcesRead},
	// legacy, kept by the brief
	"resources/subscribe":   {run: func(s *Handler, c *mcpCall) (any, *rpcError) { return s.mcpSubscribe(c, true) }},
	"resources/unsubscribe": {run: func(s *Handler, c *mcpCall) (any, *rpcError) { return s.mcpSubscribe(c, false) }},
	"prompts/list":          {run: (*Handler).mcpPromptsList},
	"prompts/get":           {methodInfo{NameField: "name"}, (*Handler).mcpPromptsGet},
	"subscriptions/listen":  {run: (*Handler).mcpListen},
	"tasks/get":             {methodInfo{NameField: "taskId"}, (*Handler).mcpTasks},
	"tasks/update":          {methodInfo{NameField: "taskId"}, (*Handler).mcpTasks},
	"tasks/cancel":          {methodInfo{NameField: "taskId"}, (*Handler).mcpTasks},
}

// mcpMethodInfo is the envelope decoder's view of mcpMethods.
var mcpMethodInfo = func() map[string]methodInfo {
	m := make(map[string]methodInfo, len(mcpMethods))
	for name, row := range mcpMethods {
		m[name] = row.methodInfo
	}
	return m
}()

// mcpMethodNames interns the names of mcpMethods: a request's method is
// the table's string, not a copy made from its body.
var mcpMethodNames = func() map[string]string {
	m := make(map[string]string, len(mcpMethods))
	for name := range mcpMethods {
		m[name] = name
	}
	return m
}()

// Application error codes, outside JSON-RPC's reserved -32768…-32000. They
// carry data.error, the Commonroom code, so clients branch on one vocabulary.
const (
	codeUnauthorized     = -31001
	codePermissionDenied = -31003
)

// mcpCall is one validated, authenticated request.
type mcpCall struct {
	ctx context.Context
	req *rpcRequest
	p   room.Principal
	w   http.ResponseWriter
	r   *http.Request
	// tool and errKind are what the method noted (the tool called, as a
	// bounded label: a known tool's name or "other"; the code of a domain
	// failure answered as a result), and toolError says the result has
	// isError: what Post puts into its Note.
	tool, errKind string
	toolError     bool
}

// tasksCapability is what a Tasks method needs the client to have declared.
var tasksCapability = map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}

func (s *Handler) serverInfo() map[string]any {
	return map[string]any{serverInfoKey: s.serverInfoValue()}
}

// serverInfoKey is the _meta key of the server's name and version.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// serverInfoValue is the server's name and version: the one map
// setServerInfo made (it is only ever encoded, never changed).
func (s *Handler) serverInfoValue() map[string]string { return s.info }

// setServerInfo makes the server-info map from s.version, and metaJSON, its
// _meta as a tool result carries it, encoded once.
func (s *Handler) setServerInfo() {
	s.info = map[string]string{"name": "commonroom-ce", "version": s.version}
	meta, err := encodeNoHTML(nil, s.serverInfo())
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	s.metaJSON = meta
}

// Post is POST /mcp: validate the envelope (spec §1.6), authenticate the
// bearer session, then dispatch. The front door is told how it went
// (Config.Note) once it is answered: one note for its log and its metrics.
func (s *Handler) Post(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	n := Note{method: "other"}
	s.post(w, r, &n)
	n.Duration = time.Since(start)
	s.notify(r, &n)
}

func (s *Handler) post(w http.ResponseWriter, r *http.Request, n *Note) {
	body, err := s.readBody(w, r)
	if err != nil {
		status := http.StatusBadRequest
		if room.ErrorKind(err) == room.KindBodyTooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		e := room.AsError(err)
		n.failed(wirejson.Kind(e.Kind), codeInvalidRequest)
		writeRPCError(w, nil, &rpcError{Status: status, Code: codeInvalidRequest, Message: e.Message})
		return
	}
	req, notification, rerr := decodeRPC(r.Header, body, mcpMethodInfo, &s.metas)
	if req != nil {
		if name, ok := mcpMethodNames[req.Method]; ok {
			n.method = name
		} else if req.Method == "notifications/cancelled" {
			n.method = req.Method
		}
	}
	if rerr != nil {
		n.failed(rpcKind(rerr), rerr.Code)
		writeRPCError(w, req.ID, rerr)
		return
	}
	if notification {
		n.RPCMethod = "notification" // a client's free text: only the one acted on is named
		if req.Method == "notifications/cancelled" {
			n.RPCMethod = "notifications/cancelled"
		}
		s.mcpNotification(w, r, req)
		return
	}
	n.RPCMethod, n.TraceID = req.Method, req.Meta.TraceID // the method is mcpMethodNames' string
	c := &mcpCall{ctx: r.Context(), req: req, w: w, r: r}
	if req.Method != "server/discover" {
		p, err := s.principal(r)
		if err != nil {
			n.failed(wirejson.Kind(room.ErrorKind(err)), s.mcpAuthError(w, req.ID, err))
			return
		}
		if s.mcpRateLimited(w, req.ID, p) {
			n.failed(string(room.KindLimitExceeded), codeInternalError)
			return
		}
		c.p = p
	}
	result, rerr := s.mcpDispatch(c)
	n.ErrKind, n.toolError, n.tool = c.errKind, c.toolError, c.tool
	if c.tool != "other" { // the label of a tool not in the catalog: the log names none
		n.Tool = c.tool
	}
	if rerr != nil {
		n.failed(rpcKind(rerr), rerr.Code)
		writeRPCError(w, req.ID, rerr)
		return
	}
	if result == nil { // the method wrote its own response (a stream)
		return
	}
	writeRPCResult(w, req.ID, result)
}

// mcpRateLimited spends one request of the session's per-minute budget, or
// answers 429 with Retry-After when it is spent: POST and GET /mcp count
// like every other route.
func (s *Handler) mcpRateLimited(w http.ResponseWriter, id json.RawMessage, p room.Principal) bool {
	ok, wait := s.allow(p.SessionRef)
	if ok {
		return false
	}
	w.Header().Set("Retry-After", itoa(wait))
	writeRPCError(w, id, &rpcError{Status: http.StatusTooManyRequests, Code: codeInternalError,
		Message: "too many requests for this session", Data: map[string]any{"error": "limit_exceeded", "retry_after_seconds": wait}})
	return true
}

// mcpAuthError answers a request without a usable session: 401, a
// WWW-Authenticate challenge, and a JSON-RPC error naming the problem;
// it returns that error's code.
func (s *Handler) mcpAuthError(w http.ResponseWriter, id json.RawMessage, err error) (code int) {
	e := room.AsError(err)
	if e.Kind != room.KindUnauthorized && e.Kind != room.KindSessionExpired {
		re := s.rpcErrorOf(err)
		writeRPCError(w, id, re)
		return re.Code
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="commonroom"`)
	writeRPCError(w, id, &rpcError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Message: e.Message,
		Data: map[string]any{"error": string(e.Kind)}})
	return codeUnauthorized
}

// rpcErrorOf maps a domain error on a protocol method (resources/read,
// tasks/*) to a JSON-RPC error: the one table for MCP.
func (s *Handler) rpcErrorOf(err error) *rpcError {
	e := room.AsError(err)
	out := s.rpcErrorOfKind(err, e)
	out.Kind = wirejson.Kind(e.Kind)
	return out
}

func (s *Handler) rpcErrorOfKind(err error, e *room.Error) *rpcError {
	data := wirejson.ErrorBody(e)
	switch e.Kind {
	case room.KindTaskNotFound:
		return invalidParams("unknown task", nil)
	case room.KindInvalidRequest, room.KindInvalidRegion, room.KindNotFound, room.KindLimitExceeded:
		// Bad or oversized params: the client must change the request, not retry it.
		return invalidParams(e.Message, data)
	case room.KindUnauthorized, room.KindSessionExpired:
		return &rpcError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Message: e.Message, Data: data}
	case room.KindPermissionDenied:
		return &rpcError{Status: http.StatusOK, Code: codePermissionDenied, Message: e.Message, Data: data}
	case room.KindOverloaded, room.KindUnavailable:
		return &rpcError{Status: http.StatusServiceUnavailable, Code: codeInternalError, Message: e.Message, Data: data}
	case room.KindInternal:
		wirejson.LogFailure(s.log, "mcp request failed", err)
		return &rpcError{Status: http.StatusOK, Code: codeInternalError, Message: "internal error"}
	}
	return &rpcError{Status: http.StatusOK, Code: codeInternalError, Message: e.Message, Data: data}
}

func (s *Handler) mcpDispatch(c *mcpCall) (any, *rpcError) {
	if m, ok := mcpMethods[c.req.Method]; ok {
		return m.run(s, c)
	}
	return nil, &rpcError{Status: http.StatusNotFound, Code: codeMethodNotFound, Message: "method not found"}
}

// complete builds a resultType "complete" result with serverInfo in _meta.
func (s *Handler) complete(fields map[string]any) map[string]any {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["resultType"] = "complete"
	meta, _ := fields["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range s.serverInfo() {
		meta[k] = v
	}
	fields["_meta"] = meta
	return fields
}

// cacheable adds the caching hints spec §2.3 requires on discovery, lists and reads.
func cacheable(fields map[string]any, ttlMs int, scope string) map[string]any {
	fields["ttlMs"] = ttlMs
	fields["cacheScope"] = scope
	return fields
}

// Instructions is what server/discover tells a model about the room: the
// workflow in one paragraph, with tools alone, and where the whole guide
// is. It is exported so that ce mcp can give a host of an older protocol,
// which starts with initialize, the same words.
const Instructions = "A Commonroom room: one Markdown file shared by people and agents. The whole guide is the resource skill://commonroom/SKILL.md " +
	"(and the prompts commonroom_edit_workflow and commonroom_handoff_workflow). Read the document with workspace_status, workspace_summary and workspace_read; " +
	"the file changes only through workspace_propose, which a human approves before workspace_commit. " +
	"Hand work to someone with handoff_create; the worker uses handoff_accept, handoff_request_input and handoff_complete; " +
	"the requester answers questions with handoff_answer, cancels with handoff_cancel, and polls handoff_get every poll_interval_ms; " +
	"someone with approve decides with handoff_approve or handoff_reject. " +
	"Clients with the Tasks extension may use tasks/get, subscriptions/listen, tasks/update and tasks/cancel instead."

func (s *Handler) mcpDiscover() map[string]any {
	return s.complete(cacheable(map[string]any{
		"supportedVersions": []string{ProtocolVersion},
		"capabilities": map[string]any{
			"tools":      map[string]any{},
			"resources":  map[string]any{"subscribe": true},
			"prompts":    map[string]any{},
			"extensions": map[string]any{TasksExtension: map[string]any{}},
		},
		"instructions": Instructions,
	}, 60_000, "public"))
}

// decodeParams reads a method's params into v; a wrong shape is -32602.
func decodeParams(params json.RawMessage, v any) *rpcError {
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams("invalid params: "+wirejson.JSONProblem(err), nil)
	}
	return nil
}

// mcpNotification accepts client notifications (202). notifications/cancelled
// ends the caller's own listen stream with that request id; nothing else is
// acted on.
func (s *Handler) mcpNotification(w http.ResponseWriter, r *http.Request, req *rpcRequest) {
	if req.Method == "notifications/cancelled" && s.hub != nil {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil && len(p.RequestID) > 0 {
			if pr, err := s.principal(r); err == nil {
				s.hub.Cancel(pr.SessionRef, idKey(p.RequestID))
			}
		}
	}
	w.WriteHeader(http.StatusAccepted)
}
