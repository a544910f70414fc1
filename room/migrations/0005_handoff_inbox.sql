-- The inbox (handoff_list, GET /workspace/handoffs, issue 16): the handoffs a
-- session may see, newest first, paged by a keyset (created_at, rowid).
-- Each source of that listing (the whole room, what a participant created,
-- what it was assigned, what was addressed to it, open calls) is read as one
-- range per status, so each index leads with the participant, then the
-- status, then created_at (and the rowid, the keyset's tie-breaker, as
-- every index ends with it). A page then costs a few B-tree descents and the
-- page, whatever the sidecar's size and whatever share of it a filter keeps.
CREATE INDEX handoffs_by_status_recent ON handoffs(status, created_at);
CREATE INDEX handoffs_by_owner_recent ON handoffs(owner_id, status, created_at);
CREATE INDEX handoffs_by_assignee_recent ON handoffs(assignee_id, status, created_at)
  WHERE assignee_id IS NOT NULL;
CREATE INDEX handoffs_by_requested_recent ON handoffs(requested_assignee_id, status, created_at)
  WHERE requested_assignee_id IS NOT NULL;

-- The key that signs the inbox's cursors, so a cursor is one this room issued
-- to this participant for this filter, and a forged one is refused. It never
-- leaves the sidecar (which is 0600).
INSERT INTO meta(key, value) VALUES ('inbox_cursor_key', lower(hex(randomblob(32))));
