package reqnote

import "testing"

// TestLabels: the metrics' labels come from the fields the door set, and
// the error type is the JSON-RPC code before a tool's isError, "" on
// success.
func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		note                  Note
		method, tool, errType string
	}{
		{"a success has no error type", Note{LabelMethod: "tools/call", LabelTool: "handoff_get"}, "tools/call", "handoff_get", ""},
		{"a tool result with isError is tool_error", Note{LabelMethod: "tools/call", LabelTool: "handoff_get", ToolError: true}, "tools/call", "handoff_get", "tool_error"},
		{"a failure is its JSON-RPC code", func() Note {
			n := Note{LabelMethod: "other"}
			n.Failed("parse_error", -32700)
			return n
		}(), "other", "", "-32700"},
		{"the code wins over isError", Note{LabelMethod: "tools/call", LabelTool: "other", Code: -32602, ToolError: true}, "tools/call", "other", "-32602"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, tool, errType := tc.note.Labels()
			if method != tc.method || tool != tc.tool || errType != tc.errType {
				t.Errorf("Labels() = %q, %q, %q; want %q, %q, %q", method, tool, errType, tc.method, tc.tool, tc.errType)
			}
		})
	}
}

// TestFailedKeepsTheKindForTheLog: the log's error kind and the metrics'
// code are both noted.
func TestFailedKeepsTheKindForTheLog(t *testing.T) {
	var n Note
	n.Failed("unauthorized", -31001)
	if n.ErrKind != "unauthorized" || n.Code != -31001 {
		t.Errorf("after Failed: ErrKind %q, Code %d", n.ErrKind, n.Code)
	}
}
