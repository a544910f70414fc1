-- Sessions slide and an agent can come back as itself (issue 16, item 4).
--
-- idle_ms is a session's idle window: each authenticated use moves its
-- expires_at to min(last use + idle_ms, issued_at + the room's maximum
-- lifetime). A session issued before this schema slides by the length it was
-- issued for, which was its idle window in all but name.
ALTER TABLE sessions ADD COLUMN idle_ms INTEGER NOT NULL DEFAULT 0 CHECK (idle_ms >= 0);
UPDATE sessions SET idle_ms = expires_at - issued_at;

-- revocations counts the times the host (or an admin, or a revoked
-- invitation) cut the participant off. A re-admission invitation records the
-- count it was minted under and is refused once the count has moved: a
-- revocation outranks every invitation issued before it, whatever the clock.
ALTER TABLE participants ADD COLUMN revocations INTEGER NOT NULL DEFAULT 0 CHECK (revocations >= 0);

-- A re-admission invitation names the participant it brings back; NULL for
-- an ordinary invitation, which admits a new participant.
ALTER TABLE invites ADD COLUMN participant_id TEXT REFERENCES participants(participant_id);
ALTER TABLE invites ADD COLUMN participant_revocations INTEGER
  CHECK ((participant_id IS NULL) = (participant_revocations IS NULL));
