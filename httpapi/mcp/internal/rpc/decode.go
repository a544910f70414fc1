package rpc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/commonroom/ce/httpapi/internal/traceparent"
	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/httpapi/present"
)

// The envelope layer of POST /mcp: one decode of the JSON-RPC body and the MCP
// routing headers, validated in the order of spec §1.6 steps 3–10. Steps 1–2
// (Host/Origin, POST-only) belong to the router; steps 11 onwards (method params,
// client capability gates, dispatch) belong to the method handlers.

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

// Request is one validated JSON-RPC request.
type Request struct {
	ID     json.RawMessage // exact bytes as sent (number or string); nil for a notification
	Method string
	Params json.RawMessage // the params object ({} when absent)
	Meta   RequestMeta
	// members is Params split into its members (nil for a notification).
	members *members
	// params and paramsBuf hold members (a request's params are split
	// into the request itself; more than 8 members grow on the heap).
	params    members
	paramsBuf [8]member
}

// RequestMeta is what the envelope layer reads from params._meta.
type RequestMeta struct {
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

// MethodInfo says what the envelope layer needs to know about a method.
type MethodInfo struct {
	NameField string // "", "name", "uri" or "taskId": the params field Mcp-Name must equal
}

// Methods is the envelope's view of a door's method table: what each
// method needs checked (MethodInfo) and its name, interned, so that a
// request's method is the table's string rather than a copy made from its
// body.
type Methods struct {
	info  map[string]MethodInfo
	names map[string]string
}

// NewMethods builds the envelope's view of the methods a door serves.
func NewMethods(info map[string]MethodInfo) *Methods {
	m := &Methods{info: info, names: make(map[string]string, len(info))}
	for name := range info {
		m.names[name] = name
	}
	return m
}

// Name is the table's copy of method, when the table has it.
func (m *Methods) Name(method string) (string, bool) {
	name, ok := m.names[method]
	return name, ok
}

// Decode decodes and validates one POST /mcp body with its headers, in the
// order of spec §1.6 steps 3–10. methods lists the methods the server serves
// (requests for any other method get 404 -32601).
//
// Outcomes:
//   - a request: req is validated and complete, notification is false, rerr is nil;
//   - a notification: req carries Method and Params (ID nil, Meta zero),
//     notification is true, rerr is nil; no header or _meta check was made and
//     the caller answers 202;
//   - an error: rerr is non-nil and req is non-nil but carries only ID — the id
//     as sent, or nil when it could not be read — for WriteError(w, req.ID, rerr).
//
// metas answers a repeated params._meta (nil: none); the outcome is the same
// either way.
func Decode(h http.Header, body []byte, methods *Methods, metas *MetaCache) (req *Request, notification bool, rerr *Error) {
	env, id, rerr := decodeEnvelope(body, methods)
	if rerr != nil {
		return &Request{ID: id}, false, rerr
	}
	if id == nil { // step 4
		return &Request{Method: env.method, Params: env.params}, true, nil
	}
	fail := func(e *Error) (*Request, bool, *Error) { return &Request{ID: id}, false, e }

	// Step 5: the protocol version header must be there.
	hdrVersion, e := requiredHeader(h, headerProtocolVersion)
	if e != nil {
		return fail(e)
	}

	// Step 6: the required _meta keys. params is split into the request's
	// own storage (one allocation for the request and its members).
	req = &Request{}
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
	info, known := methods.info[env.method]
	if known && info.NameField != "" {
		if e := checkMcpName(h, params, info.NameField); e != nil {
			return fail(e)
		}
	}

	// Step 9: the one version we serve.
	if meta.ProtocolVersion != present.ProtocolVersion {
		return fail(unsupportedVersion(meta.ProtocolVersion))
	}

	// Step 10: the method must be one we serve.
	if !known {
		return fail(methodNotFound(env.method))
	}
	req.ID, req.Method, req.Params, req.Meta, req.members = id, env.method, env.params, meta, params
	return req, false, nil
}

// unsupportedVersion is step 9's answer: the version asked for, and the
// one this server speaks.
func unsupportedVersion(requested string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeUnsupportedVersion, Message: "unsupported protocol version",
		Data: map[string]any{"supported": []string{present.ProtocolVersion}, "requested": requested}}
}

// methodNotFound is step 10's answer; the method is named in data only
// (the request log and the metrics never carry an unknown method's name).
func methodNotFound(method string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeMethodNotFound, Message: "method not found",
		Data: map[string]string{"method": method}}
}

// envelope is the top level of a request after step 3.
type envelope struct {
	method string
	params json.RawMessage // an object; {} when absent
}

// decodeEnvelope is step 3. It returns the id as sent (nil when absent or
// unreadable) alongside any error, so that the error can echo it.
func decodeEnvelope(body []byte, methods *Methods) (envelope, json.RawMessage, *Error) {
	// json.Valid rejects trailing data and nesting deeper than encoding/json's
	// limit without recursing, so nothing below sees a pathological document.
	if !json.Valid(body) {
		return envelope{}, nil, &Error{Status: http.StatusBadRequest, Code: CodeParseError, Message: "parse error: the body is not valid JSON"}
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
	env := envelope{method: internedString(raw, methods.names), params: json.RawMessage(`{}`)}
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
func decodeMeta(rawParams json.RawMessage, metas *MetaCache, params *members, list []member) (RequestMeta, *Error) {
	var err error
	if *params, err = splitMembers(rawParams, list); err != nil {
		return RequestMeta{}, metaError("params could not be decoded: " + err.Error())
	}
	rawMeta, ok := params.get("_meta")
	if !ok {
		return RequestMeta{}, metaError("params._meta is missing")
	}
	if kindOf(rawMeta) != '{' {
		return RequestMeta{}, metaError("params._meta must be an object")
	}
	if m, ok := metas.get(rawMeta); ok {
		return m, nil
	}
	var metaBuf [8]member // on the stack; meta is read after the client capabilities
	meta, err := splitMembers(rawMeta, metaBuf[:0])
	if err != nil {
		return RequestMeta{}, metaError("params._meta could not be decoded: " + err.Error())
	}

	var out RequestMeta
	raw, ok := meta.get(metaProtocolVersion)
	switch {
	case !ok:
		return RequestMeta{}, metaError(fmt.Sprintf("params._meta[%q] is missing", metaProtocolVersion))
	case kindOf(raw) != '"':
		return RequestMeta{}, metaError(fmt.Sprintf("params._meta[%q] must be a string", metaProtocolVersion))
	}
	out.ProtocolVersion = stringOf(raw)
	if e := decodeClientCaps(meta, &out); e != nil {
		return RequestMeta{}, e
	}

	if raw, ok := meta.get(metaProgressToken); ok {
		if !validID(raw) {
			return RequestMeta{}, metaError(fmt.Sprintf("params._meta.progressToken must be a string or an integer of at most %d bytes", maxIDBytes))
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

// decodeClientCaps reads _meta's client capabilities into out: the raw
// object, and which of the extensions this server acts on it declares
// (Tasks; the MCP App view, only with its mime type).
func decodeClientCaps(meta members, out *RequestMeta) *Error {
	raw, ok := meta.get(metaClientCaps)
	switch {
	case !ok:
		return metaError(fmt.Sprintf("params._meta[%q] is missing", metaClientCaps))
	case kindOf(raw) != '{':
		return metaError(fmt.Sprintf("params._meta[%q] must be an object", metaClientCaps))
	}
	out.ClientCaps = raw
	var capsBuf, extBuf [8]member // on the stack
	caps, err := splitMembers(raw, capsBuf[:0])
	if err != nil {
		return metaError(fmt.Sprintf("params._meta[%q] could not be decoded: %v", metaClientCaps, err))
	}
	rawExt, ok := caps.get("extensions")
	if !ok {
		return nil
	}
	if kindOf(rawExt) != '{' {
		return metaError(fmt.Sprintf("params._meta[%q].extensions must be an object", metaClientCaps))
	}
	ext, err := splitMembers(rawExt, extBuf[:0])
	if err != nil {
		return metaError(fmt.Sprintf("params._meta[%q].extensions could not be decoded: %v", metaClientCaps, err))
	}
	out.Tasks = kindOf(ext.val(present.TasksExtension)) == '{'
	if raw := ext.val(mcpapp.Extension); kindOf(raw) == '{' {
		out.UI = mcpapp.Declared(raw)
	}
	return nil
}

// checkMcpName is the Mcp-Name half of step 8.
func checkMcpName(h http.Header, params *members, field string) *Error {
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
func requiredHeader(h http.Header, name string) (string, *Error) {
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
