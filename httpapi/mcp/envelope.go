package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/commonroom/ce/httpapi/internal/traceparent"
	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/mcpapp"
)

// The envelope layer of POST /mcp: one decode of the JSON-RPC body and the MCP
// routing headers, validated in the order of spec §1.6 steps 3–10. Steps 1–2
// (Host/Origin, POST-only) belong to the router; steps 11 onwards (method params,
// client capability gates, dispatch) belong to the method handlers.

// ProtocolVersion is the one MCP version this door serves; discovery
// documents (/.well-known/agent-workspace, /protocol) name it too.
const ProtocolVersion = "2026-07-28"

// TasksExtension is the Tasks extension's key, in client capabilities and
// in what discovery documents advertise.
const TasksExtension = "io.modelcontextprotocol/tasks"

// JSON-RPC and MCP error codes (spec §6).
const (
	codeParseError         = -32700
	codeInvalidRequest     = -32600
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeInternalError      = -32603
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// Keys of params._meta (spec §2.2).
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaProgressToken   = "progressToken"
	// metaTraceparent carries the W3C trace context of the request (the
	// MCP convention for OpenTelemetry); only its trace id is read, for
	// the request log.
	metaTraceparent = "traceparent"
)

// Routing headers (spec §1.3). Names are matched without regard to case.
const (
	headerProtocolVersion = "MCP-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"

	// canonicalProtocolVersion is headerProtocolVersion as net/http keys it.
	canonicalProtocolVersion = "Mcp-Protocol-Version"
)

// rpcRequest is one validated JSON-RPC request.
type rpcRequest struct {
	ID     json.RawMessage // exact bytes as sent (number or string); nil for a notification
	Method string
	Params json.RawMessage // the params object ({} when absent)
	Meta   requestMeta
	// members is Params split into its members (nil for a notification).
	members *members
	// params and paramsBuf hold members (a request's params are split
	// into the request itself; more than 8 members grow on the heap).
	params    members
	paramsBuf [8]member
}

// requestMeta is what the envelope layer reads from params._meta.
type requestMeta struct {
	ProtocolVersion string
	ClientCaps      json.RawMessage // the clientCapabilities object
	Tasks           bool            // clientCapabilities.extensions["io.modelcontextprotocol/tasks"] is a JSON object
	// UI says clientCapabilities.extensions["io.modelcontextprotocol/ui"]
	// declares MCP Apps (mcpapp.Declared): the request is shown the board,
	// its links and its app-only tool.
	UI            bool
	ProgressToken json.RawMessage // string or integer as sent; nil when absent
	// TraceID is the trace id of a valid traceparent ("" when absent or
	// not valid: a bad one is ignored, never refused).
	TraceID string
}

// rpcError is a JSON-RPC error plus the HTTP status it is sent with.
type rpcError struct {
	Status  int
	Code    int
	Message string
	Data    any // nil = omitted
	// Kind is the Commonroom error code behind the error, when a domain
	// error caused it ("" for a protocol fault): the request log's
	// error kind. It is never sent.
	Kind string
}

func (e *rpcError) Error() string { return fmt.Sprintf("jsonrpc %d: %s", e.Code, e.Message) }

// methodInfo says what the envelope layer needs to know about a method.
type methodInfo struct {
	NameField string // "", "name", "uri" or "taskId": the params field Mcp-Name must equal
}

// decodeRPC decodes and validates one POST /mcp body with its headers, in the
// order of spec §1.6 steps 3–10. methods lists the methods the server serves
// (requests for any other method get 404 -32601).
//
// Outcomes:
//   - a request: req is validated and complete, notification is false, rerr is nil;
//   - a notification: req carries Method and Params (ID nil, Meta zero),
//     notification is true, rerr is nil; no header or _meta check was made and
//     the caller answers 202;
//   - an error: rerr is non-nil and req is non-nil but carries only ID — the id
//     as sent, or nil when it could not be read — for writeRPCError(w, req.ID, rerr).
//
// metas answers a repeated params._meta (nil: none); the outcome is the same
// either way.
func decodeRPC(h http.Header, body []byte, methods map[string]methodInfo, metas *metaCache) (req *rpcRequest, notification bool, rerr *rpcError) {
	env, id, rerr := decodeEnvelope(body)
	if rerr != nil {
		return &rpcRequest{ID: id}, false, rerr
	}
	if id == nil { // step 4
		return &rpcRequest{Method: env.method, Params: env.params}, true, nil
	}
	fail := func(e *rpcError) (*rpcRequest, bool, *rpcError) { return &rpcRequest{ID: id}, false, e }

	// Step 5: the protocol version header must be there.
	hdrVersion, e := requiredHeader(h, headerProtocolVersion)
	if e != nil {
		return fail(e)
	}

	// Step 6: the required _meta keys. params is split into the request's
	// own storage (one allocation for the request and its members).
	req = &rpcRequest{}
	params := &req.params
	meta, e := decodeMeta(env.params, metas, params, req.paramsBuf[:0])
	if e != nil {
		return fail(e)
	}

	// Step 7: header version must equal the _meta version.
	if hdrVersion != meta.ProtocolVersion {
		return fail(headerMismatch(fmt.Sprintf("%s header %q does not match params._meta[%q] %q",
			headerProtocolVersion, hdrVersion, metaProtocolVersion, meta.ProtocolVersion)))
	}

	// Step 8: Mcp-Method, then Mcp-Name for the name-bearing methods we serve.
	hdrMethod, e := requiredHeader(h, headerMethod)
	if e != nil {
		return fail(e)
	}
	if hdrMethod != env.method {
		return fail(headerMismatch(fmt.Sprintf("%s header %q does not match the body method %q", headerMethod, hdrMethod, env.method)))
	}
	info, known := methods[env.method]
	if known && info.NameField != "" {
		if e := checkMcpName(h, params, info.NameField); e != nil {
			return fail(e)
		}
	}

	// Step 9: the one version we serve.
	if meta.ProtocolVersion != ProtocolVersion {
		return fail(&rpcError{
			Status:  http.StatusBadRequest,
			Code:    codeUnsupportedVersion,
			Message: "unsupported protocol version",
			Data: map[string]any{
				"supported": []string{ProtocolVersion},
				"requested": meta.ProtocolVersion,
			},
		})
	}

	// Step 10: the method must be one we serve.
	if !known {
		return fail(&rpcError{
			Status:  http.StatusNotFound,
			Code:    codeMethodNotFound,
			Message: "method not found",
			Data:    map[string]string{"method": env.method},
		})
	}
	req.ID, req.Method, req.Params, req.Meta, req.members = id, env.method, env.params, meta, params
	return req, false, nil
}

// envelope is the top level of a request after step 3.
type envelope struct {
	method string
	params json.RawMessage // an object; {} when absent
}

// decodeEnvelope is step 3. It returns the id as sent (nil when absent or
// unreadable) alongside any error, so that the error can echo it.
func decodeEnvelope(body []byte) (envelope, json.RawMessage, *rpcError) {
	// json.Valid rejects trailing data and nesting deeper than encoding/json's
	// limit without recursing, so nothing below sees a pathological document.
	if !json.Valid(body) {
		return envelope{}, nil, &rpcError{Status: http.StatusBadRequest, Code: codeParseError, Message: "parse error: the body is not valid JSON"}
	}
	if kindOf(body) != '{' {
		msg := "invalid request: the body must be one JSON-RPC request object"
		if kindOf(body) == '[' {
			msg = "invalid request: batches are not supported; send one JSON-RPC request object"
		}
		return envelope{}, nil, invalidRequest(msg)
	}
	// A map, not a struct: encoding/json matches struct fields without regard to
	// case, and "METHOD" is not "method".
	var topBuf [8]member
	top, err := splitMembers(body, topBuf[:0])
	if err != nil {
		return envelope{}, nil, invalidRequest("invalid request: " + err.Error())
	}

	var id json.RawMessage
	if raw, ok := top.get("id"); ok {
		if !validID(raw) {
			return envelope{}, nil, invalidRequest(fmt.Sprintf("invalid request: id must be a string or an integer of at most %d bytes", maxIDBytes))
		}
		id = raw
	}
	if raw, ok := top.get("jsonrpc"); !ok || kindOf(raw) != '"' || !stringIs(raw, "2.0") {
		return envelope{}, id, invalidRequest(`invalid request: jsonrpc must be "2.0"`)
	}
	raw, ok := top.get("method")
	if !ok {
		_, hasResult := top.get("result")
		_, hasError := top.get("error")
		if hasResult || hasError {
			return envelope{}, id, invalidRequest("invalid request: JSON-RPC responses are not accepted")
		}
		return envelope{}, id, invalidRequest("invalid request: method is missing")
	}
	if kindOf(raw) != '"' {
		return envelope{}, id, invalidRequest("invalid request: method must be a string")
	}
	env := envelope{method: internedString(raw, mcpMethodNames), params: json.RawMessage(`{}`)}
	if raw, ok := top.get("params"); ok {
		if kindOf(raw) != '{' {
			return envelope{}, id, invalidRequest("invalid request: params must be an object")
		}
		env.params = raw
	}
	return env, id, nil
}

// decodeMeta is step 6. params is already known to be an object. It returns the
// params object as a map for the Mcp-Name check.
//
// rawParams must be a slice of a body decodeEnvelope accepted: the layers are
// split without checking their JSON again (objectMembers).
func decodeMeta(rawParams json.RawMessage, metas *metaCache, params *members, list []member) (requestMeta, *rpcError) {
	var err error
	if *params, err = splitMembers(rawParams, list); err != nil {
		return requestMeta{}, metaError("params could not be decoded: " + err.Error())
	}
	rawMeta, ok := params.get("_meta")
	if !ok {
		return requestMeta{}, metaError("params._meta is missing")
	}
	if kindOf(rawMeta) != '{' {
		return requestMeta{}, metaError("params._meta must be an object")
	}
	if m, ok := metas.get(rawMeta); ok {
		return m, nil
	}
	// The three layers below are split into arrays of their own on the
	// stack (meta is still read after caps).
	var metaBuf, capsBuf, extBuf [8]member
	meta, err := splitMembers(rawMeta, metaBuf[:0])
	if err != nil {
		return requestMeta{}, metaError("params._meta could not be decoded: " + err.Error())
	}

	var out requestMeta
	raw, ok := meta.get(metaProtocolVersion)
	switch {
	case !ok:
		return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q] is missing", metaProtocolVersion))
	case kindOf(raw) != '"':
		return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q] must be a string", metaProtocolVersion))
	}
	out.ProtocolVersion = stringOf(raw)

	raw, ok = meta.get(metaClientCaps)
	switch {
	case !ok:
		return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q] is missing", metaClientCaps))
	case kindOf(raw) != '{':
		return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q] must be an object", metaClientCaps))
	}
	out.ClientCaps = raw
	caps, err := splitMembers(raw, capsBuf[:0])
	if err != nil {
		return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q] could not be decoded: %v", metaClientCaps, err))
	}
	if rawExt, ok := caps.get("extensions"); ok {
		if kindOf(rawExt) != '{' {
			return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q].extensions must be an object", metaClientCaps))
		}
		ext, err := splitMembers(rawExt, extBuf[:0])
		if err != nil {
			return requestMeta{}, metaError(fmt.Sprintf("params._meta[%q].extensions could not be decoded: %v", metaClientCaps, err))
		}
		out.Tasks = kindOf(ext.val(TasksExtension)) == '{'
		if raw := ext.val(mcpapp.Extension); kindOf(raw) == '{' {
			out.UI = mcpapp.Declared(raw)
		}
	}

	if raw, ok := meta.get(metaProgressToken); ok {
		if !validID(raw) {
			return requestMeta{}, metaError(fmt.Sprintf("params._meta.progressToken must be a string or an integer of at most %d bytes", maxIDBytes))
		}
		out.ProgressToken = raw
	}
	if raw, ok := meta.get(metaTraceparent); ok {
		out.TraceID, _ = traceparent.FromJSON(raw)
	}
	if m, ok := out.cacheable(); ok {
		metas.put(rawMeta, m)
	}
	return out, nil
}

// checkMcpName is the Mcp-Name half of step 8.
func checkMcpName(h http.Header, params *members, field string) *rpcError {
	value, e := requiredHeader(h, headerName)
	if e != nil {
		return e
	}
	value, ok := decodeSentinel(value)
	if !ok {
		return headerMismatch(headerName + " header is not valid Base64 inside =?base64?...?=")
	}
	raw, ok := params.get(field)
	if !ok || kindOf(raw) != '"' {
		return headerMismatch(fmt.Sprintf("%s header is set but params.%s is not a string", headerName, field))
	}
	// encoding/json fills struct fields without regard to case, so a handler
	// decoding params could read "NAME" where we compared "name". Refuse the
	// ambiguity rather than let the header and the dispatched value differ.
	for _, e := range params.list {
		if k := e.key; k != field && strings.EqualFold(k, field) {
			return headerMismatch(fmt.Sprintf("params has both %q and %q; %s is ambiguous", field, k, headerName))
		}
	}
	if !stringIs(raw, value) {
		return headerMismatch(fmt.Sprintf("%s header does not match params.%s", headerName, field))
	}
	return nil
}

const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// decodeSentinel decodes a header value of the exact form =?base64?<b64>?=
// (lowercase markers, strict standard Base64 with padding) and returns any
// other value unchanged: a value lacking either marker is literal. ok is false
// when the value has the form but the Base64 is invalid.
func decodeSentinel(v string) (out string, ok bool) {
	if len(v) < len(sentinelPrefix)+len(sentinelSuffix) ||
		!strings.HasPrefix(v, sentinelPrefix) || !strings.HasSuffix(v, sentinelSuffix) {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// requiredHeader returns the one value of a routing header, trimmed of spaces
// and tabs. Missing, empty, repeated, or holding characters outside visible
// ASCII, space and tab → 400 -32020.
func requiredHeader(h http.Header, name string) (string, *rpcError) {
	values := headerValues(h, name)
	switch len(values) {
	case 0:
		return "", headerMismatch(name + " header is missing")
	case 1:
	default:
		return "", headerMismatch(name + " header is repeated")
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", headerMismatch(name + " header is empty")
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' {
			return "", headerMismatch(name + " header holds a character outside visible ASCII, space and tab")
		}
	}
	return v, nil
}

// headerValues looks a header up by name without regard to case, so that it
// also works on a Header built by hand with non-canonical keys.
func headerValues(h http.Header, name string) []string {
	key := name
	if name == headerProtocolVersion {
		key = canonicalProtocolVersion // the lookup does not canonicalize (allocate) it again
	}
	if v := h.Values(key); len(v) > 0 {
		return v
	}
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
		}
	}
	return out
}

// maxIDBytes bounds a request id or progress token as sent (quotes included).
const maxIDBytes = 256

// validID reports whether raw, one valid JSON value, is a string or an integer
// (a number with no fraction and no exponent) of at most maxIDBytes as sent.
// It is used for ids and progress tokens, which are echoed byte for byte, so
// a bound here is the only bound on what they send back.
func validID(raw json.RawMessage) bool {
	if len(bytes.TrimSpace(raw)) > maxIDBytes {
		return false
	}
	switch kindOf(raw) {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return !bytes.ContainsAny(raw, ".eE")
	}
	return false
}

// kindOf returns the first byte of a JSON value ('{', '[', '"', 'n', 't', 'f',
// '-' or a digit), skipping leading white space; 0 for nothing.
func kindOf(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// stringOf decodes a raw JSON string already known to be one.
func stringOf(raw json.RawMessage) string {
	if kindOf(raw) == '"' {
		if s, err := unquoteString(bytes.TrimSpace(raw)); err == nil {
			return s
		}
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func invalidRequest(msg string) *rpcError {
	return &rpcError{Status: http.StatusBadRequest, Code: codeInvalidRequest, Message: msg}
}

func headerMismatch(msg string) *rpcError {
	return &rpcError{Status: http.StatusBadRequest, Code: codeHeaderMismatch, Message: "header mismatch: " + msg}
}

// metaError is a step-6 failure: a required _meta field is missing or malformed.
func metaError(msg string) *rpcError {
	return &rpcError{Status: http.StatusBadRequest, Code: codeInvalidParams, Message: "invalid params: " + msg}
}

// missingCapability is 400 -32021 for a request that needs a client capability
// it did not declare. caps is a ClientCapabilities object, e.g.
// map[string]any{"extensions": map[string]any{TasksExtension: struct{}{}}}.
func missingCapability(caps any) *rpcError {
	return &rpcError{
		Status:  http.StatusBadRequest,
		Code:    codeMissingCapability,
		Message: "missing required client capability",
		Data:    map[string]any{"requiredCapabilities": caps},
	}
}

// invalidParams is a method-level -32602 (unknown tool, bad cursor, unknown
// task, …), sent with HTTP 200. data may be nil.
func invalidParams(msg string, data any) *rpcError {
	return &rpcError{Status: http.StatusOK, Code: codeInvalidParams, Message: msg, Data: data}
}

// rpcErrorBody is the wire form of a JSON-RPC error response.
type rpcErrorBody struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Error   rpcErrorObject  `json:"error"`
}

type rpcErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// writeRPCError sends e with status e.Status as application/json. id is echoed
// as given; a nil id leaves the member out (never null).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	body := rpcErrorBody{JSONRPC: "2.0", ID: id, Error: rpcErrorObject{Code: e.Code, Message: wirejson.Clip(e.Message, wirejson.MaxErrorString), Data: wirejson.BoundStrings(e.Data)}}
	b, err := marshalJSON(body)
	if err != nil && e.Data != nil { // data that cannot be encoded is dropped
		body.Error.Data = nil
		b, err = marshalJSON(body)
	}
	if err != nil { // only an id that is not JSON gets here
		body.ID = nil
		b, _ = marshalJSON(body)
	}
	writeJSON(w, e.Status, b)
}

// writeRPCResult sends {"jsonrpc":"2.0","id":id,"result":result} as
// application/json with status 200. A result that cannot be encoded becomes a
// -32603 error (also 200: a JSON-RPC-level error, spec §1.5).
// The result is encoded straight into the response (no copy of a large
// result is held while it is sent); the bytes are marshalJSON's.
func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	if f, ok := result.(*framedResult); ok {
		// StatusOnWrite's one write, without one on the heap.
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(f.b)
		f.release()
		return
	}
	out := &wirejson.StatusOnWrite{W: w, Status: http.StatusOK}
	if raw, ok := result.(rawResult); ok {
		if sent, _ := writeRawResult(out, id, raw); sent {
			return
		}
		result = json.RawMessage(raw)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	if err != nil && !out.Wrote {
		writeRPCError(w, id, &rpcError{Status: http.StatusOK, Code: codeInternalError, Message: "internal error: the result could not be encoded"})
	}
}

// marshalJSON encodes v without HTML escaping, so that ids and strings go back
// byte for byte as they came.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
