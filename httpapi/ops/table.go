package ops

import (
	"context"
	"log/slog"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// Table is every operation of the room, in the order /protocol lists them
// (and tools/list lists the tools). Rows without a Call are served by
// hand-wired routes in httpapi: session.join and session.join_challenge
// (no session yet, the transport is read off the request), session.page (a
// page key, from the bearer token only), observe (an SSE
// stream), and the MCP endpoints (a JSON-RPC adapter with its own method table). The owner page,
// /debug and /owner/key are owner-listener routes outside this protocol.
var Table = []Op{
	{Name: "session.join", HTTP: "POST /session/join", Capability: "invitation"},
	{Name: "session.join_challenge", HTTP: "POST /session/join/challenge", Capability: "invitation"},
	// session.page is a session's one-time link to its own page on the
	// ingress (issue 28); bearer only, so a page's cookie cannot mint more.
	{Name: "session.page", HTTP: "POST /session/page", Capability: "read"},
	{Name: "status", HTTP: "GET /workspace/status", Capability: "read",
		Tool: "workspace_status", Title: "Room status",
		Description: "The room at a glance: workspace id, current version, counts of participants, leases and pending proposals, and the heading outline. Needs read.",
		Call:        Read((*room.Engine).Status)},
	{Name: "summary", HTTP: "GET /workspace/summary", Capability: "read",
		Tool: "workspace_summary", Title: "Document summary",
		Description: "The first ten outline entries and a bounded excerpt of the current version. Start here before reading sections. Needs read.",
		Call:        Read((*room.Engine).Summary)},
	{Name: "regions", HTTP: "GET /workspace/regions", Capability: "read",
		Tool: "workspace_regions", Title: "Document regions",
		Description: "Every heading of the current version with its level, line and path; a path or title is a selector for workspace_read and leases. Needs read.",
		Call:        Read((*room.Engine).Regions), Bare: func(r any) any { return r.(room.RegionsResult).Regions }},
	{Name: "read", HTTP: "GET /workspace/read", Capability: "read",
		Tool: "workspace_read", Title: "Read the document",
		Description: "Read one section (or the document) of the current version, bounded by lines then bytes (at most 1 MiB). A truncated answer carries next_offset: read again with offset=next_offset for the rest. The answer carries the version to propose against. Needs read.",
		Call:        Read((*room.Engine).Read)},
	{Name: "diff", HTTP: "GET /workspace/diff", Capability: "read",
		Tool: "workspace_diff", Title: "Diff since a version",
		Description: "A unified diff from base_version to the current version: what changed since you last read. Needs read.",
		Call:        Read((*room.Engine).Diff)},
	{Name: "changes_since", HTTP: "GET /workspace/changes_since", Capability: "read",
		Tool: "workspace_changes_since", Title: "Versions since",
		Description: "The summaries of the versions after `version`, oldest first, with who made each. Needs read.",
		Call:        Read((*room.Engine).ChangesSince)},
	{Name: "history", HTTP: "GET /workspace/history", Capability: "read",
		Tool: "workspace_history", Title: "Room history",
		Description: "Events from the room's ring (the newest 2,000): newest first, or ascending after since_event_id. oldest_event_id tells whether a gap fell off the ring. Needs read.",
		Call:        Read((*room.Engine).History)},
	{Name: "participants", HTTP: "GET /workspace/participants", Capability: "read",
		Tool: "workspace_participants", Title: "Participants",
		Description: "Who is in the room (people and agents that have not left), oldest first. Needs read.",
		Call:        Read((*room.Engine).Participants), Bare: func(r any) any { return r.(room.ParticipantsResult).Participants }},
	{Name: "leases", HTTP: "GET /workspace/leases", Capability: "read",
		Tool: "workspace_leases", Title: "Leases",
		Description: "Who is working on which section right now (live leases). Leases are advisory: they say who is on it, they do not lock. Needs read.",
		Call:        Read((*room.Engine).Leases), Bare: func(r any) any { return r.(room.LeasesResult).Leases }},
	{Name: "proposals", HTTP: "GET /workspace/proposals", Capability: "read",
		Tool: "workspace_proposals", Title: "Proposals",
		Description: "Proposed changes, newest first, with their status, their scope (\"section\", or \"document\" for a whole-document replacement) and the size of their text (not the text: read one with workspace_proposal). One page at a time: pass next_cursor back as cursor for older ones. Needs read.",
		Call:        Read((*room.Engine).Proposals)},
	{Name: "proposal", HTTP: "GET /workspace/proposal", Capability: "read",
		Tool: "workspace_proposal", Title: "One proposal with its text",
		Description: "One proposal with the text it proposes (change.content), its scope (\"section\": it replaces change.section; \"document\": it replaces the whole document), its status and review. Needs read.",
		Call:        Read((*room.Engine).GetProposal)},
	{Name: "diagnostics", HTTP: "GET /workspace/diagnostics", Capability: "read",
		Tool: "workspace_diagnostics", Title: "Diagnostics",
		Description: "How the room is reached (transport type, mode and whether it is encrypted; the endpoint only for an admin) and who is connected over what. Needs read.",
		Call:        Read((*room.Engine).Diagnostics)},
	{Name: "room", HTTP: "GET /workspace/room", Capability: "read", Call: Read((*room.Engine).Room)},
	// Reviewing like a pull request: a proposal's diffs, history one version at a time (the owner page).
	{Name: "proposal.diff", HTTP: "GET /workspace/proposal/diff", Capability: "read", Call: Read((*room.Engine).ProposalDiff)},
	{Name: "version", HTTP: "GET /workspace/version", Capability: "read", Call: Read((*room.Engine).VersionStep)},
	// What waits on the caller: the owner page's count and `ce inbox`.
	{Name: "waiting", HTTP: "GET /workspace/waiting", Capability: "read", Call: Read((*room.Engine).Waiting)},
	{Name: "observe", HTTP: "GET /workspace/observe", Capability: "observe"},
	{Name: "checkout", HTTP: "POST /workspace/checkout", Capability: "checkout",
		Tool: "workspace_checkout", Title: "Lease a section",
		Description: "Tell the room you are working on a section. A lease conflicts with leases on the same section, its ancestors and descendants; it expires by itself. Needs checkout.",
		Call:        Write((*room.Engine).Checkout)},
	{Name: "renew", HTTP: "POST /workspace/renew", Capability: "checkout",
		Tool: "workspace_renew", Title: "Renew a lease",
		Description: "Extend a lease you hold. Needs checkout.",
		Call:        Write((*room.Engine).Renew)},
	{Name: "release", HTTP: "POST /workspace/release", Capability: "checkout",
		Tool: "workspace_release", Title: "Release a lease",
		Description: "End a lease (your own; admin may end anyone's). Needs checkout.",
		Call:        Write((*room.Engine).Release)},
	{Name: "propose", HTTP: "POST /workspace/propose", Capability: "propose",
		Tool: "workspace_propose", Title: "Propose a change",
		Description: "Propose new text for one section, or for the whole document, against the version you read (base_version). To change a section, name it in both target and change.section (the same section, e.g. target \"Venue\" and change.section \"Venue\"), and give its new text, heading line included, as change.content; a section target without change.section, or two different sections, is refused (invalid_request naming change.section). To replace the whole document, set target to \"workspace\" and leave change.section out. The answer's scope says which it is: \"section\" or \"document\". A human reviews it; once approved, commit it with workspace_commit. base_is_current says whether the document is still at your base. Needs propose.",
		Call:        Write((*room.Engine).Propose)},
	{Name: "proposal.review", HTTP: "POST /workspace/proposal/review", Capability: "approve",
		Tool: "workspace_review", Title: "Approve or reject a proposal",
		Description: "Decide on a pending proposal. Needs approve.",
		Call:        Write((*room.Engine).Review)},
	{Name: "commit", HTTP: "POST /workspace/commit", Capability: "commit (admin for raw content)",
		Tool: "workspace_commit", Title: "Commit an approved proposal",
		Description: "Write an approved proposal into the Markdown file as a new version (needs commit). If the document moved on since its base, the proposal becomes conflicted and you get stale_version with the diff: read it and propose again. Admins may commit raw content against a base version.",
		Call:        Write((*room.Engine).Commit)},
	{Name: "invite", HTTP: "POST /workspace/invite", Capability: "invite",
		Tool: "workspace_invite", Title: "Create an invitation",
		Description: "Create a commonroom://join/… invitation. The secret is shown only in this answer. Needs invite.",
		Call:        Write((*room.Engine).CreateInvite)},
	{Name: "invites", HTTP: "GET /workspace/invites", Capability: "invite", Call: Read((*room.Engine).ListInvites)},
	{Name: "invite.revoke", HTTP: "POST /workspace/invite/revoke", Capability: "invite", Call: Write((*room.Engine).RevokeInvite)},
	{Name: "leave", HTTP: "POST /workspace/leave", Capability: "session",
		Tool: "workspace_leave", Title: "Leave the room",
		Description: "End your participation: your sessions end and your leases are released. Handoffs you own or work on are not changed.",
		Call:        Write((*room.Engine).Leave)},
	{Name: "session.end", HTTP: "POST /workspace/session/end", Capability: "admin", Call: Write((*room.Engine).EndSession)},
	{Name: "handoff.create", HTTP: "POST /workspace/handoff", Capability: "propose",
		Tool: "handoff_create", Title: "Hand work to someone",
		Description: "Ask another participant to do a piece of work. Creates a handoff and its task, committed before the answer. With the io.modelcontextprotocol/tasks extension declared the answer is a task handle (poll tasks/get, or follow it on subscriptions/listen); without it, the handoff and its task_id. At most 32 tasks may be active in a room, and by default 8 of them from one participant's handoffs; over either, limit_exceeded names the cap (scope room or participant). Needs propose.",
		Call:        Write((*room.Engine).CreateHandoff), Audit: warnReplayDiffers},
	{Name: "handoff.get", HTTP: "GET /workspace/handoff", Capability: "read",
		Tool: "handoff_get", Title: "Read a handoff",
		Description: "The handoff as it stands: status, parties, result, and for its parties the input requests (inputs) with their answers. While its task is live, poll_interval_ms says how many milliseconds to wait before reading it again (null once the task is done): an agent that cannot listen polls this. This is the authority after any gap. Needs read.",
		Call:        CachedRead((*room.Engine).GetHandoff, room.HandoffReadKey)},
	{Name: "handoff.events", HTTP: "GET /workspace/handoff/events", Capability: "read",
		Tool: "handoff_events", Title: "A handoff's events",
		Description: "The handoff's and its task's events still in the room's ring, oldest first. Use it to catch up after a gap; oldest_event_id says whether part of the gap is gone. Needs read.",
		Call:        Read((*room.Engine).HandoffEvents)},
	{Name: "handoff.list", HTTP: "GET /workspace/handoffs", Capability: "read",
		Tool: "handoff_list", Title: "Your handoffs (inbox)",
		Description: "The handoffs you may see, newest first, each as handoff_get shows it (with poll_interval_ms while its task is live): role narrows to assigned_to_me (you accepted it or it is addressed to you), created_by_me, or open_to_accept (open handoffs you could accept now); status narrows further. One page at a time (limit, default 50): pass next_cursor back as cursor, with the same role and status, for older ones. Needs read.",
		Call:        Read((*room.Engine).ListHandoffs)},
	{Name: "handoff.accept", HTTP: "POST /workspace/handoff/accept", Capability: "checkout",
		Tool: "handoff_accept", Title: "Accept a handoff",
		Description: "Take on an open handoff. You become its assignee; its task stays working. Only the requested assignee may accept a targeted handoff; the owner never can. Needs checkout.",
		Call:        Write((*room.Engine).AcceptHandoff)},
	{Name: "handoff.request_input", HTTP: "POST /workspace/handoff/request_input", Capability: "checkout",
		Tool: "handoff_request_input", Title: "Ask the owner a question",
		Description: "As the assignee, pause for the owner's input: the task becomes input_required with these inputRequests. The owner answers with handoff_answer (or tasks/update, or the owner page); read the answers with handoff_get (inputs). Needs checkout.",
		Call:        Write((*room.Engine).RequestInput)},
	{Name: "handoff.answer", HTTP: "POST /workspace/handoff/answer", Capability: "handoff owner or admin",
		Tool: "handoff_answer", Title: "Answer the worker's questions",
		Description: "As the handoff's owner (or an admin), answer the assignee's open questions: handoff_get lists them under inputs (status open), each with its key, message and requested_schema. input_responses maps each key you answer to {\"action\": \"accept\", \"content\": {…the fields requested_schema names; by default \"answer\"}} (or action decline or cancel to refuse it). This is what tasks/update does, for agents that can only call tools. When every open question is answered the task is working again; a partial answer leaves it input_required. Keys that are not open questions are ignored, not refused: the answer lists answered_keys and ignored_keys beside the handoff as it now stands, so check that yours landed. Anyone else is refused; a handoff you may not see is handoff_not_found.",
		Call:        Write((*room.Engine).AnswerHandoff)},
	{Name: "handoff.complete", HTTP: "POST /workspace/handoff/complete", Capability: "checkout",
		Tool: "handoff_complete", Title: "Deliver the result",
		Description: "As the assignee, deliver the result: the task completes and the handoff waits for approval (result_ready). A second completion keeps the first result. Needs checkout.",
		Call:        Write((*room.Engine).CompleteHandoff)},
	{Name: "handoff.approve", HTTP: "POST /workspace/handoff/approve", Capability: "approve",
		Tool: "handoff_approve", Title: "Approve a result",
		Description: "Accept a delivered result (handoff result_ready → approved). The task is not changed. The assignee cannot approve their own result. Needs approve.",
		Call:        Write((*room.Engine).ApproveHandoff)},
	{Name: "handoff.reject", HTTP: "POST /workspace/handoff/reject", Capability: "approve",
		Tool: "handoff_reject", Title: "Reject a result",
		Description: "Turn down a delivered result (handoff result_ready → rejected, final). The task is not changed; re-work is a new handoff with follows_handoff_id. Needs approve.",
		Call:        Write((*room.Engine).RejectHandoff)},
	{Name: "handoff.cancel", HTTP: "POST /workspace/handoff/cancel", Capability: "handoff owner or admin",
		Tool: "handoff_cancel", Title: "Cancel your handoff",
		Description: "As the handoff's owner (or an admin), stop the work: the handoff and its task become cancelled and its open questions close. This is what tasks/cancel does, for agents that can only call tools. Only an open or accepted handoff can be cancelled; any other is answered as it stands with cancelled: false and nothing changes (a result_ready handoff is decided with handoff_approve or handoff_reject, not cancelled). The answer is the handoff as it now stands and cancelled (true when this call cancelled it). Anyone else, the assignee included, is refused; a handoff you may not see is handoff_not_found.",
		Call:        Write((*room.Engine).CancelHandoff)},
	// tasks/get over plain HTTP, answered the same way (the task cache).
	{Name: "task.get", HTTP: "GET /workspace/task", Capability: "task owner, assignee or admin", Call: RoomRead(getTask)},
	{Name: "task.update", HTTP: "POST /workspace/task/update", Capability: "task owner or admin", Call: Write((*room.Engine).UpdateTask)},
	{Name: "task.cancel", HTTP: "POST /workspace/task/cancel", Capability: "task owner or admin", Call: Write((*room.Engine).CancelTask)},
	// The host's moderation action (issue 13 item 10), the twin of ce
	// cancel-handoffs and the owner page's button. It has no MCP tool on
	// purpose: the tool catalog is shown to every agent and carries no host
	// moderation (D4); an admin agent can cancel each handoff with
	// handoff_cancel (or tasks/cancel), or call this route with its session.
	{Name: "participant.cancel_handoffs", HTTP: "POST /workspace/participant/cancel_handoffs", Capability: "admin",
		Call: Write((*room.Engine).CancelParticipantHandoffs)},
	{Name: "mcp", HTTP: "POST /mcp", Capability: "session (server/discover is public)"},
	{Name: "mcp.legacy_stream", HTTP: "GET /mcp", Capability: "session + read"},
}

func getTask(ctx context.Context, r *actor.Room, p room.Principal, in room.TaskIDInput) (room.DetailedTask, error) {
	return r.Task(ctx, p, in.TaskID)
}

// warnReplayDiffers tells the operator when an idempotency key came back
// with different arguments: the caller gets the original, not an error.
func warnReplayDiffers(log *slog.Logger, p room.Principal, result any) {
	if res := result.(room.CreateHandoffResult); res.ArgumentsDiffer {
		log.Warn("handoff_create replayed an idempotency key with different arguments; the original stands",
			"handoff_id", res.Handoff.HandoffID, "participant_id", p.ParticipantID)
	}
}
