-- Versions are stored as content-defined chunks, each distinct chunk once
-- (issue 17): a one-line commit to a large document stored the whole text
-- again. version_chunks holds the chunks; a version row keeps its text's
-- size and the list of its chunk ids (zig-zag varint differences, see
-- room/versionstore.go). The Go step of this migration (chunkVersions)
-- then stores the text of every existing version as chunks, checks each
-- rebuilds byte for byte, and drops versions.content, in this same
-- transaction.
CREATE TABLE version_chunks (
  chunk_id INTEGER PRIMARY KEY,
  sha256   BLOB NOT NULL UNIQUE CHECK (length(sha256) = 32), -- of the chunk's text
  size     INTEGER NOT NULL CHECK (size > 0),                 -- of the chunk's text
  codec    INTEGER NOT NULL CHECK (codec IN (0, 1)),          -- 0 the text as is, 1 one zstd frame
  data     BLOB NOT NULL
) STRICT;

ALTER TABLE versions ADD COLUMN size INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0);
ALTER TABLE versions ADD COLUMN chunk_ids BLOB NOT NULL DEFAULT x'';
