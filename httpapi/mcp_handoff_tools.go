package httpapi

import (
	"context"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

var artifactSchema = obj(map[string]any{
	"uri":        str("what the artifact is: a commonroom:// URI, a proposal id, a version, or a URL (stored, never fetched)"),
	"title":      str("a short label"),
	"media_type": str("e.g. text/markdown"),
	"digest":     str("e.g. sha256:…"),
}, "uri")

var handoffID = str("the handoff's id (handoff_…)")

// createHandoff is shared by handoff_create and POST /workspace/handoff.
func (s *Server) createHandoff(ctx context.Context, p room.Principal, in room.CreateHandoffInput) (room.CreateHandoffResult, error) {
	res, err := actor.Do(ctx, s.room, "handoff.create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
		return s.eng.CreateHandoff(tx, p, in)
	})
	if err == nil && res.ArgumentsDiffer {
		s.log.Warn("handoff_create replayed an idempotency key with different arguments; the original stands",
			"handoff_id", res.Handoff.HandoffID, "participant_id", p.ParticipantID)
	}
	return res, err
}

func handoffTools() []tool {
	return []tool{
		{Name: "handoff_create", Title: "Hand work to someone",
			Input: obj(map[string]any{
				"summary":            str("what needs doing (at most 2,000 characters)"),
				"constraints":        str("how it must be done, limits, acceptance criteria (at most 8,000 characters)"),
				"assignee":           str("participant id of who should do it; omit to let anyone with checkout accept"),
				"target":             str("a region of the document this is about (context only)"),
				"base_version":       integer("the document version this refers to", 1),
				"follows_handoff_id": str("the handoff this re-does (e.g. after a rejection)"),
				"idempotency_key":    str("repeat-safe key: the same key returns the original handoff and task"),
				"artifacts":          array("references the work starts from (at most 32)", artifactSchema),
			}, "summary"),
			Description: "Ask another participant to do a piece of work. Creates a handoff and its task, committed before the answer. With the io.modelcontextprotocol/tasks extension declared the answer is a task handle (poll tasks/get, or follow it on subscriptions/listen); without it, the handoff and its task_id. At most 32 tasks may be active in a room, and by default 8 of them from one participant's handoffs; over either, limit_exceeded names the cap (scope room or participant). Needs propose.",
			run: func(s *Server, c *toolCall) (any, error) {
				var in room.CreateHandoffInput
				if err := decodeArgs(c.args, &in); err != nil {
					return nil, err
				}
				res, err := s.createHandoff(c.ctx, c.p, in)
				if err != nil {
					return nil, err
				}
				if c.tasks && res.Task != nil && !res.TaskPurged {
					return taskHandle{task: *res.Task}, nil
				}
				out := map[string]any{"handoff": res.Handoff, "task_id": res.Handoff.TaskID}
				if res.Replayed {
					out["replayed"] = true
				}
				if res.TaskPurged {
					out["task_purged"] = true
				}
				return out, nil
			}},
		{Name: "handoff_accept", Title: "Accept a handoff",
			Input:       obj(map[string]any{"handoff_id": handoffID}, "handoff_id"),
			Description: "Take on an open handoff. You become its assignee; its task stays working. Only the requested assignee may accept a targeted handoff; the owner never can. Needs checkout.",
			run:         writeTool("handoff.accept", (*room.Engine).AcceptHandoff)},
		{Name: "handoff_request_input", Title: "Ask the owner a question",
			Input: obj(map[string]any{
				"handoff_id": handoffID,
				"requests": array("questions, each with a key unique for the task's life", obj(map[string]any{
					"key":              str("1..64 characters, never reused on this task"),
					"message":          str("the question (at most 2,000 characters)"),
					"requested_schema": map[string]any{"type": "object", "description": "an MCP elicitation form schema for the answer; default: one string field \"answer\""},
				}, "key", "message")),
			}, "handoff_id", "requests"),
			Description: "As the assignee, pause for the owner's input: the task becomes input_required with these inputRequests. The owner answers with tasks/update (or the owner page); read the answers with handoff_get. Needs checkout.",
			run:         writeTool("handoff.request_input", (*room.Engine).RequestInput)},
		{Name: "handoff_complete", Title: "Deliver the result",
			Input: obj(map[string]any{
				"handoff_id": handoffID,
				"result": obj(map[string]any{
					"text":      str("the result (the whole result is at most 256 KiB)"),
					"artifacts": array("what you produced: proposal ids, versions, URIs (at most 32)", artifactSchema),
					"is_error":  boolean("true if the work could not be done; the task still completes"),
				}, "text"),
				"status_message": str("a short status for the task"),
			}, "handoff_id", "result"),
			Description: "As the assignee, deliver the result: the task completes and the handoff waits for approval (result_ready). A second completion keeps the first result. Needs checkout.",
			run:         writeTool("handoff.complete", (*room.Engine).CompleteHandoff)},
		{Name: "handoff_get", Title: "Read a handoff", ReadOnly: true,
			Input:       obj(map[string]any{"handoff_id": handoffID}, "handoff_id"),
			Description: "The handoff as it stands: status, parties, result, and for its parties the input requests with their answers. This is the authority after any gap. Needs read.",
			run:         readTool((*room.Engine).GetHandoff)},
		{Name: "handoff_events", Title: "A handoff's events", ReadOnly: true,
			Input: obj(map[string]any{
				"handoff_id":     handoffID,
				"since_event_id": integer("only events after this id", 0),
				"limit":          integer("at most this many (default 50, at most 200)", 0),
			}, "handoff_id"),
			Description: "The handoff's and its task's events still in the room's ring, oldest first. Use it to catch up after a gap; oldest_event_id says whether part of the gap is gone. Needs read.",
			run:         readTool((*room.Engine).HandoffEvents)},
		{Name: "handoff_approve", Title: "Approve a result",
			Input:       obj(map[string]any{"handoff_id": handoffID, "note": str("why (optional)")}, "handoff_id"),
			Description: "Accept a delivered result (handoff result_ready → approved). The task is not changed. The assignee cannot approve their own result. Needs approve.",
			run:         writeTool("handoff.approve", (*room.Engine).ApproveHandoff)},
		{Name: "handoff_reject", Title: "Reject a result",
			Input:       obj(map[string]any{"handoff_id": handoffID, "note": str("why (optional)")}, "handoff_id"),
			Description: "Turn down a delivered result (handoff result_ready → rejected, final). The task is not changed; re-work is a new handoff with follows_handoff_id. Needs approve.",
			run:         writeTool("handoff.reject", (*room.Engine).RejectHandoff)},
	}
}
