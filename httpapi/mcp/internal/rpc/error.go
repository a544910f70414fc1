package rpc

import (
	"fmt"
	"net/http"
	"strconv"
)

// JSON-RPC and MCP error codes (spec §6).
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeHeaderMismatch     = -32020
	CodeMissingCapability  = -32021
	CodeUnsupportedVersion = -32022
)

// Application error codes, outside JSON-RPC's reserved -32768…-32000. They
// carry data.error, the Commonroom code, so clients branch on one vocabulary.
const (
	CodeUnauthorized     = -31001
	CodePermissionDenied = -31003
)

// Error is a JSON-RPC error plus the HTTP status it is sent with.
type Error struct {
	Status  int
	Code    int
	Message string
	Data    any // nil = omitted
	// Kind is the Commonroom error code behind the error, when a domain
	// error caused it ("" for a protocol fault): the request log's
	// error kind. It is never sent.
	Kind string
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc %d: %s", e.Code, e.Message) }

// LogKind is the request log's name for the error: the Commonroom
// code behind it when there is one, else its fault's name.
func (e *Error) LogKind() string {
	if e.Kind != "" {
		return e.Kind
	}
	switch e.Code {
	case CodeParseError:
		return "parse_error"
	case CodeInvalidRequest:
		return "invalid_request"
	case CodeMethodNotFound:
		return "method_not_found"
	case CodeInvalidParams:
		return "invalid_params"
	case CodeInternalError:
		return "internal_error"
	case CodeHeaderMismatch:
		return "header_mismatch"
	case CodeMissingCapability:
		return "missing_capability"
	case CodeUnsupportedVersion:
		return "unsupported_version"
	case CodeUnauthorized:
		return "unauthorized"
	case CodePermissionDenied:
		return "permission_denied"
	}
	return "rpc_error_" + strconv.Itoa(e.Code)
}

func invalidRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: msg}
}

func headerMismatch(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeHeaderMismatch, Message: "header mismatch: " + msg}
}

// metaError is a step-6 failure: a required _meta field is missing or malformed.
func metaError(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidParams, Message: "invalid params: " + msg}
}

// MissingCapability is 400 -32021 for a request that needs a client capability
// it did not declare. caps is a ClientCapabilities object, e.g.
// map[string]any{"extensions": map[string]any{TasksExtension: struct{}{}}}.
func MissingCapability(caps any) *Error {
	return &Error{
		Status:  http.StatusBadRequest,
		Code:    CodeMissingCapability,
		Message: "missing required client capability",
		Data:    map[string]any{"requiredCapabilities": caps},
	}
}

// InvalidParams is a method-level -32602 (unknown tool, bad cursor, unknown
// task, …), sent with HTTP 200. data may be nil.
func InvalidParams(msg string, data any) *Error {
	return &Error{Status: http.StatusOK, Code: CodeInvalidParams, Message: msg, Data: data}
}
