-- Nobody can make the room keep more than their share (issue 26, item 1).
-- One row per participant: the UTC day (Unix ms / 86,400,000) its count is
-- for and the bytes its actions made the room store that day (handoff
-- text, results, input requests and answers, proposals, artifacts, each
-- with a fixed per-record overhead; room/storage_share.go). A row of an
-- earlier day counts as zero, so the table never holds more than one row
-- per participant and needs no sweeping. No foreign key: retention deletes
-- the row with its participant.
CREATE TABLE storage_usage (
  participant_id TEXT PRIMARY KEY,
  day            INTEGER NOT NULL CHECK (day >= 0),
  bytes          INTEGER NOT NULL CHECK (bytes >= 0)
) STRICT, WITHOUT ROWID;

-- Tombstones of what retention pruned (issue 26, item 2), so a read of a
-- pruned handoff or proposal answers "pruned", not "not found". Handoff
-- and proposal ids are random; id_key is the first 64 bits of the id's hex
-- part, which identifies it (a collision only makes a never-seen id read
-- "pruned"). A tombstone is kept as long as the record's own window, then
-- dropped with it (pruned_ids_age), so the table holds at most one
-- window's worth and the sidecar levels off. Versions need no tombstone:
-- versions are numbered 1, 2, … and never deleted otherwise, so a missing
-- number at or below the newest was pruned.
CREATE TABLE pruned_ids (
  id_key    INTEGER PRIMARY KEY,
  kind      TEXT NOT NULL CHECK (kind IN ('handoff','proposal')),
  pruned_at INTEGER NOT NULL
) STRICT;
CREATE INDEX pruned_ids_age ON pruned_ids(pruned_at);
