package room

// completeToolResult is the tool result a completed task stores
// (result_json). It was encoded from a map, which costs the writer a map per
// level, reflection on each value and a key sort on every complete; a struct
// whose fields are declared in the map's sorted key order encodes to the
// same bytes (TestCompleteToolResultEncodesAsTheMapDid).
type completeToolResult struct {
	Content           []textContent             `json:"content"`
	IsError           bool                      `json:"isError"`
	ResultType        string                    `json:"resultType"`
	StructuredContent completeStructuredContent `json:"structuredContent"`
}

// textContent is one text block of a tool result.
type textContent struct {
	Text string `json:"text"`
	Type string `json:"type"`
}

// completeStructuredContent is the structured half of a completed task's
// result: which handoff and its artifacts.
type completeStructuredContent struct {
	Artifacts []Artifact `json:"artifacts"`
	HandoffID string     `json:"handoff_id"`
}

// newCompleteToolResult is the stored tool result of a handoff's result.
func newCompleteToolResult(handoffID string, result ResultInput) completeToolResult {
	return completeToolResult{
		Content:           []textContent{{Text: result.Text, Type: "text"}},
		IsError:           result.IsError,
		ResultType:        "complete",
		StructuredContent: completeStructuredContent{Artifacts: result.Artifacts, HandoffID: handoffID},
	}
}
