package mcptest

import (
	"bytes"
	"encoding/json"
)

// The protocol's names, kept in one place so a test, the crash test and the
// bench cannot drift apart on them (spec: MCP 2026-07-28 §1).
const (
	// Version is the protocol version every request declares.
	Version = "2026-07-28"
	// TasksExtension is the extension a client declares to get task handles.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// MetaVersion, MetaCaps and MetaInfo are the params._meta members a
	// client sends on every request.
	MetaVersion = "io.modelcontextprotocol/protocolVersion"
	MetaCaps    = "io.modelcontextprotocol/clientCapabilities"
	MetaInfo    = "io.modelcontextprotocol/clientInfo"
	// MetaServerInfo is the _meta member the server puts on every result.
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
	// MetaSubscriptionID is the _meta member naming the listen a frame belongs to.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// HandoffMeta is the _meta member of a CreateTaskResult naming its handoff.
	HandoffMeta = "commonroom/handoff_id"
	// AckMethod is the first frame of every subscriptions/listen stream.
	AckMethod = "notifications/subscriptions/acknowledged"
	// TaskMethod and ResourceMethod are the notifications a listen carries.
	TaskMethod     = "notifications/tasks"
	ResourceMethod = "notifications/resources/updated"
	// Accept is the Accept header a conforming client sends on POST /mcp.
	Accept = "application/json, text/event-stream"
)

// The JSON-RPC error codes an answer on /mcp carries, written out as the
// spec gives them (§6; the application codes of §2) rather than taken from
// the server's own constants, so a test pins the number on the wire and not
// whatever the server says.
const (
	CodeParseError         = -32700 // the body is not JSON
	CodeInvalidRequest     = -32600 // JSON, but not one JSON-RPC request
	CodeMethodNotFound     = -32601 // unknown or not advertised method
	CodeInvalidParams      = -32602 // params (or a required _meta member) wrong
	CodeInternalError      = -32603
	CodeHeaderMismatch     = -32020 // a routing header disagrees with the body
	CodeMissingCapability  = -32021 // the Tasks extension was not declared
	CodeUnsupportedVersion = -32022 // a protocol version the server does not speak
	CodeUnauthorized       = -31001 // no live session
	CodePermissionDenied   = -31003 // the session lacks the capability
)

// NameField is the params member Mcp-Name carries for method ("" when the
// method has none): spec §1.3.
func NameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId"
	}
	return ""
}

// Caps is the clientCapabilities object: empty, or declaring the Tasks
// extension.
func Caps(tasks bool) map[string]any {
	if tasks {
		return map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}
	}
	return map[string]any{}
}

// Meta is the params._meta a conforming client sends: the version, its
// capabilities and who it is.
func Meta(version string, caps map[string]any, clientName string) map[string]any {
	return map[string]any{
		MetaVersion: version,
		MetaCaps:    caps,
		MetaInfo:    map[string]any{"name": clientName, "version": "0.0.1"},
	}
}

// Marshal encodes v without HTML escaping, as a non-Go client would, so raw
// ids and texts keep their bytes.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Envelope builds a JSON-RPC request body. id is spliced in as it is (raw
// JSON; nil for a notification), so a test can send ids of any JSON type
// and spelling.
func Envelope(id json.RawMessage, method string, params any) ([]byte, error) {
	pj, err := Marshal(params)
	if err != nil {
		return nil, err
	}
	mj, err := Marshal(method)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(pj)+len(mj)+len(id)+48)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != nil {
		b = append(append(append(b, `"id":`...), id...), ',')
	}
	b = append(append(append(b, `"method":`...), mj...), `,"params":`...)
	return append(append(b, pj...), '}'), nil
}
