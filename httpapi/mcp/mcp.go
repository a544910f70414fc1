package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/commonroom/ce/httpapi/internal/reqnote"
	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/present"
	"github.com/commonroom/ce/room"
)

// method is one row of the MCP method table: what the envelope decoder
// needs (the params field Mcp-Name must equal) and the handler dispatch
// calls.
type method struct {
	rpc.MethodInfo
	run func(h *Handler, c *call) (any, *rpc.Error)
}

// methods are the methods POST /mcp serves. initialize, ping,
// logging/setLevel, tasks/list and tasks/result are absent on purpose: they
// answer 404 -32601.
var methods = map[string]method{
	"server/discover":          {run: func(h *Handler, _ *call) (any, *rpc.Error) { return h.discover(), nil }},
	"tools/list":               {run: (*Handler).toolsList},
	"tools/call":               {rpc.MethodInfo{NameField: "name"}, (*Handler).toolsCall},
	"resources/list":           {run: (*Handler).resourcesList},
	"resources/templates/list": {run: (*Handler).templatesList},
	"resources/read":           {rpc.MethodInfo{NameField: "uri"}, (*Handler).resourcesRead},
	// legacy, kept by the brief
	"resources/subscribe":   {run: func(h *Handler, c *call) (any, *rpc.Error) { return h.legacySubscribe(c, true) }},
	"resources/unsubscribe": {run: func(h *Handler, c *call) (any, *rpc.Error) { return h.legacySubscribe(c, false) }},
	"prompts/list":          {run: (*Handler).promptsList},
	"prompts/get":           {rpc.MethodInfo{NameField: "name"}, (*Handler).promptsGet},
	"subscriptions/listen":  {run: (*Handler).subscriptionsListen},
	"tasks/get":             {rpc.MethodInfo{NameField: "taskId"}, (*Handler).tasks},
	"tasks/update":          {rpc.MethodInfo{NameField: "taskId"}, (*Handler).tasks},
	"tasks/cancel":          {rpc.MethodInfo{NameField: "taskId"}, (*Handler).tasks},
}

// methodTable is the envelope decoder's view of methods.
var methodTable = func() *rpc.Methods {
	m := make(map[string]rpc.MethodInfo, len(methods))
	for name, row := range methods {
		m[name] = row.MethodInfo
	}
	return rpc.NewMethods(m)
}()

// call is one validated, authenticated request.
type call struct {
	ctx context.Context
	req *rpc.Request
	p   room.Principal
	w   http.ResponseWriter
	r   *http.Request
	// tool and errKind are what the method noted (the tool called, as a
	// bounded label: a known tool's name or "other"; the code of a domain
	// failure answered as a result), and toolError says the result has
	// isError: what Post puts into its reqnote.Note.
	tool, errKind string
	toolError     bool
}

// tasksCapability is what a Tasks method needs the client to have declared.
var tasksCapability = map[string]any{"extensions": map[string]any{present.TasksExtension: map[string]any{}}}

func (h *Handler) serverInfo() map[string]any {
	return map[string]any{serverInfoKey: h.serverInfoValue()}
}

// serverInfoKey is the _meta key of the server's name and version.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// serverInfoValue is the server's name and version: the one map
// setServerInfo made (it is only ever encoded, never changed).
func (h *Handler) serverInfoValue() map[string]string { return h.info }

// setServerInfo makes the server-info map from h.version, and metaJSON, its
// _meta as a tool result carries it, encoded once.
func (h *Handler) setServerInfo() {
	h.info = map[string]string{"name": "commonroom-ce", "version": h.version}
	meta, err := rpc.EncodeNoHTML(nil, h.serverInfo())
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	h.metaJSON = meta
}

// Post is POST /mcp: validate the envelope (spec §1.6), authenticate the
// bearer session, then dispatch. The front door is told how it went
// (Config.Note) once it is answered: one note for its log and its metrics.
func (h *Handler) Post(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	n := reqnote.Note{LabelMethod: "other"}
	h.post(w, r, &n)
	n.Duration = time.Since(start)
	h.notify(r, &n)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, n *reqnote.Note) {
	req, notification, ok := h.decode(w, r, n)
	if !ok {
		return
	}
	if notification {
		n.RPCMethod = "notification" // a client's free text: only the one acted on is named
		if req.Method == "notifications/cancelled" {
			n.RPCMethod = "notifications/cancelled"
		}
		h.notification(w, r, req)
		return
	}
	n.RPCMethod, n.TraceID = req.Method, req.Meta.TraceID // the method is methodTable's string
	c := &call{ctx: r.Context(), req: req, w: w, r: r}
	if req.Method != "server/discover" && !h.admit(c, n) {
		return
	}
	result, rerr := h.dispatch(c)
	n.ErrKind, n.ToolError, n.LabelTool = c.errKind, c.toolError, c.tool
	if c.tool != "other" { // the label of a tool not in the catalog: the log names none
		n.Tool = c.tool
	}
	if rerr != nil {
		fail(w, n, req.ID, rerr)
		return
	}
	if result == nil { // the method wrote its own response (a stream)
		return
	}
	rpc.WriteResult(w, req.ID, result)
}

// decode reads the body within the front door's bounds and decodes its
// envelope (rpc.Decode), noting the method; ok is false when it failed and
// the error was answered.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, n *reqnote.Note) (req *rpc.Request, notification, ok bool) {
	body, err := h.readBody(w, r)
	if err != nil {
		status := http.StatusBadRequest
		if room.ErrorKind(err) == room.KindBodyTooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		e := room.AsError(err)
		n.Failed(wirejson.Kind(e.Kind), rpc.CodeInvalidRequest)
		rpc.WriteError(w, nil, &rpc.Error{Status: status, Code: rpc.CodeInvalidRequest, Message: e.Message})
		return nil, false, false
	}
	req, notification, rerr := rpc.Decode(r.Header, body, methodTable, &h.metas)
	if req != nil {
		if name, ok := methodTable.Name(req.Method); ok {
			n.LabelMethod = name
		} else if req.Method == "notifications/cancelled" {
			n.LabelMethod = req.Method
		}
	}
	if rerr != nil {
		fail(w, n, req.ID, rerr)
		return nil, false, false
	}
	return req, notification, true
}

// admit authenticates the call's bearer session and spends one request of
// its budget; false when it may not go on (the refusal was answered).
func (h *Handler) admit(c *call, n *reqnote.Note) bool {
	p, err := h.principal(c.r)
	if err != nil {
		n.Failed(wirejson.Kind(room.ErrorKind(err)), h.authError(c.w, c.req.ID, err))
		return false
	}
	if h.rateLimited(c.w, c.req.ID, p) {
		n.Failed(string(room.KindLimitExceeded), rpc.CodeInternalError)
		return false
	}
	c.p = p
	return true
}

// fail answers a request with rerr and notes how it failed.
func fail(w http.ResponseWriter, n *reqnote.Note, id json.RawMessage, rerr *rpc.Error) {
	n.Failed(rerr.LogKind(), rerr.Code)
	rpc.WriteError(w, id, rerr)
}

// rateLimited spends one request of the session's per-minute budget, or
// answers 429 with Retry-After when it is spent: POST and GET /mcp count
// like every other route.
func (h *Handler) rateLimited(w http.ResponseWriter, id json.RawMessage, p room.Principal) bool {
	ok, wait := h.allow(p.SessionRef)
	if ok {
		return false
	}
	w.Header().Set("Retry-After", itoa(wait))
	rpc.WriteError(w, id, &rpc.Error{Status: http.StatusTooManyRequests, Code: rpc.CodeInternalError,
		Message: "too many requests for this session", Data: map[string]any{"error": "limit_exceeded", "retry_after_seconds": wait}})
	return true
}

// authError answers a request without a usable session: 401, a
// WWW-Authenticate challenge, and a JSON-RPC error naming the problem;
// it returns that error's code.
func (h *Handler) authError(w http.ResponseWriter, id json.RawMessage, err error) (code int) {
	e := room.AsError(err)
	if e.Kind != room.KindUnauthorized && e.Kind != room.KindSessionExpired {
		re := h.rpcErrorOf(err)
		rpc.WriteError(w, id, re)
		return re.Code
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="commonroom"`)
	rpc.WriteError(w, id, &rpc.Error{Status: http.StatusUnauthorized, Code: rpc.CodeUnauthorized, Message: e.Message,
		Data: map[string]any{"error": string(e.Kind)}})
	return rpc.CodeUnauthorized
}

// rpcErrorOf maps a domain error on a protocol method (resources/read,
// tasks/*) to a JSON-RPC error: the one table for MCP.
func (h *Handler) rpcErrorOf(err error) *rpc.Error {
	e := room.AsError(err)
	out := h.rpcErrorOfKind(err, e)
	out.Kind = wirejson.Kind(e.Kind)
	return out
}

func (h *Handler) rpcErrorOfKind(err error, e *room.Error) *rpc.Error {
	data := wirejson.ErrorBody(e)
	switch e.Kind {
	case room.KindTaskNotFound:
		return rpc.InvalidParams("unknown task", nil)
	case room.KindInvalidRequest, room.KindInvalidRegion, room.KindNotFound, room.KindLimitExceeded:
		// Bad or oversized params: the client must change the request, not retry it.
		return rpc.InvalidParams(e.Message, data)
	case room.KindUnauthorized, room.KindSessionExpired:
		return &rpc.Error{Status: http.StatusUnauthorized, Code: rpc.CodeUnauthorized, Message: e.Message, Data: data}
	case room.KindPermissionDenied:
		return &rpc.Error{Status: http.StatusOK, Code: rpc.CodePermissionDenied, Message: e.Message, Data: data}
	case room.KindOverloaded, room.KindUnavailable:
		return &rpc.Error{Status: http.StatusServiceUnavailable, Code: rpc.CodeInternalError, Message: e.Message, Data: data}
	case room.KindInternal:
		wirejson.LogFailure(h.log, "mcp request failed", err)
		return &rpc.Error{Status: http.StatusOK, Code: rpc.CodeInternalError, Message: "internal error"}
	}
	return &rpc.Error{Status: http.StatusOK, Code: rpc.CodeInternalError, Message: e.Message, Data: data}
}

func (h *Handler) dispatch(c *call) (any, *rpc.Error) {
	if m, ok := methods[c.req.Method]; ok {
		return m.run(h, c)
	}
	return nil, &rpc.Error{Status: http.StatusNotFound, Code: rpc.CodeMethodNotFound, Message: "method not found"}
}

// complete builds a resultType "complete" result with serverInfo in _meta.
func (h *Handler) complete(fields map[string]any) map[string]any {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["resultType"] = "complete"
	meta, _ := fields["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range h.serverInfo() {
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

func (h *Handler) discover() map[string]any {
	return h.complete(cacheable(map[string]any{
		"supportedVersions": []string{present.ProtocolVersion},
		"capabilities": map[string]any{
			"tools":      map[string]any{},
			"resources":  map[string]any{"subscribe": true},
			"prompts":    map[string]any{},
			"extensions": map[string]any{present.TasksExtension: map[string]any{}},
		},
		"instructions": present.Instructions,
	}, 60_000, "public"))
}

// notification accepts client notifications (202). notifications/cancelled
// ends the caller's own listen stream with that request id; nothing else is
// acted on.
func (h *Handler) notification(w http.ResponseWriter, r *http.Request, req *rpc.Request) {
	if req.Method == "notifications/cancelled" && h.hub != nil {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil && len(p.RequestID) > 0 {
			if pr, err := h.principal(r); err == nil {
				h.hub.Cancel(pr.SessionRef, idKey(p.RequestID))
			}
		}
	}
	w.WriteHeader(http.StatusAccepted)
}
