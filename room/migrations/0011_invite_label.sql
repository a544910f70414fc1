-- An invitation may carry a label the host gave it (issue 27, item 3:
-- "for the reviewer agent"), shown wherever invitations are listed so the
-- host can tell them apart and revoke the right one. Bounded here as in the
-- engine (room/invites.go, maxInviteLabelChars); NULL for none.
ALTER TABLE invites ADD COLUMN label TEXT CHECK (label IS NULL OR length(label) BETWEEN 1 AND 80);
