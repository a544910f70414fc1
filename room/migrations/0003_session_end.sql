-- The host (or an admin) can end a session, and revoking an invitation can
-- end the sessions it admitted (issue 13, item 11). Schema 1 allowed only
-- left, expired and replaced as a session's end_reason, and SQLite cannot
-- change a CHECK in place: the table is rebuilt with the same columns, in
-- the same order, and the same rows. Nothing references sessions, so the
-- drop touches no other table.
CREATE TABLE sessions_v3 (
  session_ref    TEXT PRIMARY KEY,
  token_sha256   BLOB NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  capabilities   TEXT NOT NULL CHECK (json_valid(capabilities) AND json_type(capabilities) = 'array'),
  transport      TEXT NOT NULL CHECK (length(transport) <= 64),
  issued_at      INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL CHECK (expires_at > issued_at),
  last_seen_at   INTEGER NOT NULL,
  ended_at       INTEGER,
  end_reason     TEXT CHECK (end_reason IN ('left','expired','replaced','ended_by_host','ended_by_admin','invite_revoked')),
  CHECK ((ended_at IS NULL) = (end_reason IS NULL))
) STRICT;
INSERT INTO sessions_v3 SELECT session_ref, token_sha256, participant_id, capabilities, transport,
  issued_at, expires_at, last_seen_at, ended_at, end_reason FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v3 RENAME TO sessions;
CREATE INDEX sessions_live ON sessions(expires_at) WHERE ended_at IS NULL;
CREATE INDEX sessions_by_participant ON sessions(participant_id) WHERE ended_at IS NULL;

-- One invitation with many uses could fill every session of the room: each
-- invitation now caps its live sessions. NULL takes the room's default
-- (Limits.MaxSessionsPerInvite) at join time; a value may only lower it.
ALTER TABLE invites ADD COLUMN max_live_sessions INTEGER CHECK (max_live_sessions IS NULL OR max_live_sessions >= 1);

-- Join counts an invitation's live sessions through the participants it
-- admitted, and revoking with end_sessions finds them the same way.
CREATE INDEX participants_by_invite ON participants(invite_id) WHERE invite_id IS NOT NULL;
