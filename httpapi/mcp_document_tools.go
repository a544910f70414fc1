package httpapi

import (
	"github.com/commonroom/ce/room"
)

var changeSchema = obj(map[string]any{
	"content": str("the new text of the section (heading line included) or of the whole document"),
	"section": str("the section to replace (a title or path); omit to replace the whole document"),
}, "content")

// documentTools are the workspace_* tools that read the document's history
// or change it through leases, proposals, review and commit.
func documentTools() []tool {
	return []tool{
		{Name: "workspace_diff", Title: "Diff since a version", ReadOnly: true,
			Input:       obj(map[string]any{"base_version": integer("the version you read before", 1)}, "base_version"),
			Description: "A unified diff from base_version to the current version: what changed since you last read. Needs read.",
			run:         readTool((*room.Engine).Diff)},
		{Name: "workspace_changes_since", Title: "Versions since", ReadOnly: true,
			Input: obj(map[string]any{
				"version": integer("list the versions after this one", 0),
				"limit":   integer("at most this many (default 20, at most 200)", 0),
			}, "version"),
			Description: "The summaries of the versions after `version`, oldest first, with who made each. Needs read.",
			run:         readTool((*room.Engine).ChangesSince)},
		{Name: "workspace_leases", Title: "Leases", ReadOnly: true, Input: noArgs,
			Description: "Who is working on which section right now (live leases). Leases are advisory: they say who is on it, they do not lock. Needs read.",
			run:         readTool((*room.Engine).Leases)},
		{Name: "workspace_proposals", Title: "Proposals", ReadOnly: true,
			Input: obj(map[string]any{
				"status": str("only this status: pending, approved, rejected, committed, conflicted or superseded"),
				"limit":  integer("at most this many (default 50, at most 200)", 0),
				"cursor": str("next_cursor from the previous page, to continue the listing (same status)"),
			}),
			Description: "Proposed changes, newest first, with their status and the size of their text (not the text: read one with workspace_proposal). One page at a time: pass next_cursor back as cursor for older ones. Needs read.",
			run:         readTool((*room.Engine).Proposals)},
		{Name: "workspace_proposal", Title: "One proposal with its text", ReadOnly: true,
			Input:       obj(map[string]any{"proposal_id": str("the proposal to read")}, "proposal_id"),
			Description: "One proposal with the text it proposes (change.content), its status and review. Needs read.",
			run:         readTool((*room.Engine).GetProposal)},
		{Name: "workspace_diagnostics", Title: "Diagnostics", ReadOnly: true, Input: noArgs,
			Description: "How the room is reached (transport type, mode and whether it is encrypted; the endpoint only for an admin) and who is connected over what. Needs read.",
			run:         readTool((*room.Engine).Diagnostics)},
		{Name: "workspace_checkout", Title: "Lease a section",
			Input: obj(map[string]any{
				"target":  str("a section title or path, or \"workspace\" for the whole document"),
				"minutes": integer("how long (default 15, at most 120)", 1),
			}, "target"),
			Description: "Tell the room you are working on a section. A lease conflicts with leases on the same section, its ancestors and descendants; it expires by itself. Needs checkout.",
			run:         writeTool("checkout", (*room.Engine).Checkout)},
		{Name: "workspace_renew", Title: "Renew a lease",
			Input: obj(map[string]any{
				"lease_id": str("the lease you hold"),
				"minutes":  integer("new length from now (capped at 120 minutes after acquisition)", 1),
			}, "lease_id"),
			Description: "Extend a lease you hold. Needs checkout.",
			run:         writeTool("renew", (*room.Engine).Renew)},
		{Name: "workspace_release", Title: "Release a lease",
			Input:       obj(map[string]any{"lease_id": str("the lease to end")}, "lease_id"),
			Description: "End a lease (your own; admin may end anyone's). Needs checkout.",
			run:         writeTool("release", (*room.Engine).Release)},
		{Name: "workspace_propose", Title: "Propose a change",
			Input: obj(map[string]any{
				"target":       str("the section this is about (title or path), or \"workspace\""),
				"base_version": integer("the version you read", 1),
				"summary":      str("one line saying what the change does"),
				"change":       changeSchema,
			}, "target", "base_version", "change"),
			Description: "Propose new text for a section (or the document) against the version you read. A human reviews it; once approved, commit it with workspace_commit. The answer says whether your base is still current. Needs propose.",
			run:         writeTool("propose", (*room.Engine).Propose)},
		{Name: "workspace_review", Title: "Approve or reject a proposal",
			Input: obj(map[string]any{
				"proposal_id": str("the pending proposal"),
				"approve":     boolean("true approves, false rejects"),
			}, "proposal_id", "approve"),
			Description: "Decide on a pending proposal. Needs approve.",
			run:         writeTool("review", (*room.Engine).Review)},
		{Name: "workspace_commit", Title: "Commit an approved proposal",
			Input: obj(map[string]any{
				"proposal_id":  str("the approved proposal to write into the file"),
				"base_version": integer("raw commit only (admin): the version the content is based on", 1),
				"summary":      str("raw commit only (admin): what changed"),
				"content":      str("raw commit only (admin): the new text"),
				"target":       str("raw commit only (admin): replace only this section"),
			}),
			Description: "Write an approved proposal into the Markdown file as a new version (needs commit). If the document moved on since its base, the proposal becomes conflicted and you get stale_version with the diff: read it and propose again. Admins may commit raw content against a base version.",
			run:         writeTool("commit", (*room.Engine).Commit)},
	}
}
