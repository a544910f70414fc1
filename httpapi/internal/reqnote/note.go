// Package reqnote is what the MCP door tells the front door about one
// request (Note), so that the request log and the metrics (package
// httpapi) read it without importing the door: only the wiring names the
// MCP door.
package reqnote

import (
	"strconv"
	"time"
)

// Note is what the MCP door tells the front door about one POST /mcp once
// it is answered, for the request log (and the room's metrics): which
// method and tool it was, how it ended and which trace it belongs to.
// Every field is a name this server chose or checked — a method or tool it
// serves, an error code, a validated trace id — never text the client sent
// unchecked, so a note can be logged as it is.
type Note struct {
	// RPCMethod is the JSON-RPC method, when it is one this door serves
	// (a notification's, when it is notifications/cancelled; other
	// notifications are "notification"); "" when the body was refused
	// before its method was known.
	RPCMethod string
	// Tool is tools/call's tool, when it is in the catalog.
	Tool string
	// ErrKind is how the request failed: the Commonroom error code of a
	// domain failure (a tool's isError result included: not_found,
	// permission_denied, limit_exceeded…), else the JSON-RPC fault
	// (parse_error, invalid_request, method_not_found, invalid_params,
	// internal_error, header_mismatch, missing_capability,
	// unsupported_version). "" when it succeeded.
	ErrKind string
	// TraceID is the trace id of a valid params._meta.traceparent ("" when
	// there is none).
	TraceID string
	// Duration is how long the door took, from receipt until the answer
	// was written (a stream's: its life).
	Duration time.Duration

	// What Labels derives the metrics' bounded labels from, set by the
	// door: the method (a served one, notifications/cancelled, or "other",
	// also for a body refused before its method was read), the tool label
	// ("other" for a name not in the catalog), the JSON-RPC code answered,
	// and whether a tool's result had isError.
	LabelMethod, LabelTool string
	Code                   int
	ToolError              bool
}

// Failed notes how a request failed: kind for the log, the JSON-RPC code
// answered for the metrics.
func (n *Note) Failed(kind string, code int) { n.ErrKind, n.Code = kind, code }

// Labels are the note as the request histogram's labels (the OpenTelemetry
// MCP convention's mcp.method.name, gen_ai.tool.name and error.type): each
// from a bounded set, whatever a client sent. errType is "" on success,
// "tool_error" for a tool result with isError, else the JSON-RPC code.
func (n Note) Labels() (method, tool, errType string) {
	switch {
	case n.Code != 0:
		errType = strconv.Itoa(n.Code)
	case n.ToolError:
		errType = "tool_error"
	}
	return n.LabelMethod, n.LabelTool, errType
}
