-- Retention (issue 26, item 2) deletes terminal handoffs, never one that
-- another handoff follows, and thins old versions, deleting a chunk once
-- no version uses it.
--
-- handoffs_followed finds a handoff's followers. It is partial: only a
-- handoff that follows another has an entry, so creating an ordinary
-- handoff writes nothing more. SQLite uses it too for the foreign key
-- check of follows_handoff_id when a handoff is deleted (x = ? implies
-- x IS NOT NULL), which otherwise walked the whole table per delete.
CREATE INDEX handoffs_followed ON handoffs(follows_handoff_id) WHERE follows_handoff_id IS NOT NULL;

-- refs counts the version rows whose chunk list names the chunk (each
-- mention once), so pruning a version can delete the chunks only it used.
-- The Go step of this migration (countChunkRefs) fills it for the
-- versions already stored, in this same transaction.
ALTER TABLE version_chunks ADD COLUMN refs INTEGER NOT NULL DEFAULT 0 CHECK (refs >= 0);
