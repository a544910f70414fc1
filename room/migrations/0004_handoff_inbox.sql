-- The inbox (handoff_list, GET /workspace/handoffs, issue 16): the handoffs a
-- session may see, newest first, paged by a keyset (created_at, rowid).
-- Each index below serves one source of that listing so that a page costs a
-- B-tree descent and the page, whatever the sidecar's size: the whole room
-- (admins and approvers), one status of it, what a participant created, what
-- it was assigned, and what was addressed to it. Every index ends with the
-- rowid, the keyset's tie-breaker. Open calls (open, addressed to nobody)
-- are a range of the status index.
CREATE INDEX handoffs_recent ON handoffs(created_at);
CREATE INDEX handoffs_by_status_recent ON handoffs(status, created_at);
CREATE INDEX handoffs_by_owner_recent ON handoffs(owner_id, created_at);
CREATE INDEX handoffs_by_assignee_recent ON handoffs(assignee_id, created_at)
  WHERE assignee_id IS NOT NULL;
CREATE INDEX handoffs_by_requested_recent ON handoffs(requested_assignee_id, created_at)
  WHERE requested_assignee_id IS NOT NULL;

-- The key that signs the inbox's cursors, so a cursor is one this room issued
-- to this participant for this filter, and a forged one is refused. It never
-- leaves the sidecar (which is 0600).
INSERT INTO meta(key, value) VALUES ('inbox_cursor_key', lower(hex(randomblob(32))));
