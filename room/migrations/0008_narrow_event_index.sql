-- Every handoff step writes an event naming its handoff, and the ring trim
-- after every batch deletes as many old ones, so both land on the index of
-- events by handoff at random (handoff ids are random). Keyed by the whole
-- id (40 characters), its ~2,000 entries filled about 30 pages, and a batch
-- of 26 commands rewrote most of them: 0.86 WAL pages per command, a
-- quarter of all the pages a lifecycle step writes (issue 17). Keyed by the
-- id's last 8 hex digits (32 random bits) an entry is a third of the size,
-- so a batch dirties a third of the pages. A handoff's events are found by
-- that key and then checked against the whole id (handoff_read.go), so two
-- handoffs that share the 8 digits cost a row more to read, never a wrong
-- answer.
DROP INDEX events_by_handoff;
CREATE INDEX events_by_handoff_tail ON events(substr(handoff_id, -8)) WHERE handoff_id IS NOT NULL;
