-- The inbox's indexes by participant (migration 5) lead with the
-- participant, then the status, then created_at. Every lifecycle step
-- changes the status, so each step moved the handoff's entry within its
-- owner's (and its assignee's) part of those indexes: with the bench's 64
-- agents, nearly every command of a batch rewrote a leaf of its own in each,
-- 0.89 + 0.69 of the 3.5 WAL pages a lifecycle command wrote (issue 17).
-- Each is now two partial indexes with the same key: one over the live
-- handoffs (open, accepted, result_ready), which stays a few pages whatever
-- the sidecar's size, so a batch's steps share them; one over the settled
-- ones (approved, rejected, cancelled), which a handoff enters once, when it
-- settles, and never leaves. A listing reads each status as one range, as
-- before; the status is written into its query, so SQLite knows which of
-- the two indexes holds it.
DROP INDEX handoffs_by_owner_recent;
DROP INDEX handoffs_by_assignee_recent;
DROP INDEX handoffs_by_requested_recent;
CREATE INDEX handoffs_by_owner_live ON handoffs(owner_id, status, created_at)
  WHERE (status = 'open' OR status = 'accepted' OR status = 'result_ready');
CREATE INDEX handoffs_by_owner_settled ON handoffs(owner_id, status, created_at)
  WHERE (status = 'approved' OR status = 'rejected' OR status = 'cancelled');
CREATE INDEX handoffs_by_assignee_live ON handoffs(assignee_id, status, created_at)
  WHERE assignee_id IS NOT NULL AND (status = 'open' OR status = 'accepted' OR status = 'result_ready');
CREATE INDEX handoffs_by_assignee_settled ON handoffs(assignee_id, status, created_at)
  WHERE assignee_id IS NOT NULL AND (status = 'approved' OR status = 'rejected' OR status = 'cancelled');
CREATE INDEX handoffs_by_requested_live ON handoffs(requested_assignee_id, status, created_at)
  WHERE requested_assignee_id IS NOT NULL AND (status = 'open' OR status = 'accepted' OR status = 'result_ready');
CREATE INDEX handoffs_by_requested_settled ON handoffs(requested_assignee_id, status, created_at)
  WHERE requested_assignee_id IS NOT NULL AND (status = 'approved' OR status = 'rejected' OR status = 'cancelled');
