package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
)

// ToolResult is a CallToolResult or, for handoff_create with the Tasks
// extension, a CreateTaskResult: the members a caller branches on.
type ToolResult struct {
	ResultType        string          `json:"resultType"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	TaskID            string          `json:"taskId"`
	Status            string          `json:"status"`
	Meta              struct {
		HandoffID string `json:"commonroom/handoff_id"`
	} `json:"_meta"`
}

// ErrorCode is the Commonroom error code of an isError result ("" otherwise).
func (r ToolResult) ErrorCode() string {
	if !r.IsError {
		return ""
	}
	var b struct {
		Error string `json:"error"`
	}
	json.Unmarshal(r.StructuredContent, &b)
	return b.Error
}

// ToolError is an isError result: a domain failure the server reported.
type ToolError struct {
	Tool, Code, Body string
}

// Error names the tool and the Commonroom error code it answered.
func (e *ToolError) Error() string { return fmt.Sprintf("%s: isError %s: %s", e.Tool, e.Code, e.Body) }

// Tool calls a tool. An isError result comes back as a *ToolError together
// with the decoded result, so an expected refusal can be told from the rest.
func (c *Client) Tool(ctx context.Context, name string, args map[string]any) (ToolResult, error) {
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return ToolResult{}, err
	}
	var r ToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, &RPCError{Status: 200, Body: "undecodable tool result: " + Clip(raw)}
	}
	if r.IsError {
		return r, &ToolError{Tool: name, Code: r.ErrorCode(), Body: Clip(r.StructuredContent)}
	}
	return r, nil
}

// TaskState is what tasks/get answers about a task.
type TaskState struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	PollIntervalMs int    `json:"pollIntervalMs"`
}

// TaskGet is tasks/get; an answer about another task, or without a status,
// is an error.
func (c *Client) TaskGet(ctx context.Context, taskID string) (TaskState, error) {
	raw, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": taskID})
	if err != nil {
		return TaskState{}, err
	}
	var t TaskState
	if err := json.Unmarshal(raw, &t); err != nil || t.TaskID != taskID || t.Status == "" {
		return t, &RPCError{Status: 200, Body: "tasks/get answered something else: " + Clip(raw)}
	}
	return t, nil
}

// TaskCancel is tasks/cancel.
func (c *Client) TaskCancel(ctx context.Context, taskID string) error {
	_, err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": taskID})
	return err
}

// TaskAnswer accepts one outstanding input request (key) with tasks/update.
func (c *Client) TaskAnswer(ctx context.Context, taskID, key, answer string) error {
	_, err := c.Call(ctx, "tasks/update", map[string]any{"taskId": taskID,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}}})
	return err
}

// Handoff is a created handoff and its task.
type Handoff struct {
	ID, TaskID string
}

// CreateHandoff is handoff_create with the Tasks extension declared: the
// answer must be a task handle whose _meta names the handoff.
func (c *Client) CreateHandoff(ctx context.Context, args map[string]any) (Handoff, error) {
	r, err := c.WithTasks(true).Tool(ctx, "handoff_create", args)
	if err != nil {
		return Handoff{}, err
	}
	if r.ResultType != "task" || r.TaskID == "" || r.Meta.HandoffID == "" {
		return Handoff{}, &RPCError{Status: 200, Body: fmt.Sprintf("handoff_create: not a task handle (resultType %q)", r.ResultType)}
	}
	return Handoff{ID: r.Meta.HandoffID, TaskID: r.TaskID}, nil
}
