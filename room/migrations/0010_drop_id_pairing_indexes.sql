-- A lifecycle command's COMMIT writes every page it dirtied to the WAL, and
-- creating a handoff dirtied one random leaf in each of two indexes that no
-- query reads: the ones SQLite keeps for handoffs.task_id UNIQUE and
-- tasks.correlation_id UNIQUE. Both are keyed by 128-bit random ids, so
-- each create wrote a leaf of its own in each (0.22 to 0.24 pages each, of
-- the 2.3 to 2.6 WAL pages a lifecycle command wrote, and at a million
-- handoffs two page-cache misses per create; issue 17). Both columns are
-- written once, at create, with ids minted in that command; every lookup
-- between a handoff and its task goes through a primary key (the task
-- row's correlation_id, the handoff row's task_id). The 1:1 pairing is
-- made by the create and checked by TestHandoffsAndTasksPairOneToOne.
--
-- SQLite cannot drop a constraint in place, so both tables are rebuilt by
-- its documented procedure (lang_altertable.html#otheralter): the runner
-- turns foreign keys off around this migration (store.go) and runs
-- PRAGMA foreign_key_check before the commit. Each new table has the same
-- columns in the same order, the same types, defaults, CHECK and FOREIGN
-- KEY constraints, and is STRICT as before, so INSERT ... SELECT * copies
-- the rows with their rowids (the inbox's cursors carry them) B-tree to
-- B-tree; then every index of migrations 1 to 9 is made again, with the
-- same text. Nothing else changes. One table is copied and dropped before
-- the other is copied, so the second copy and the indexes reuse the pages
-- the first freed: at a million handoffs the file grows by a third
-- instead of by two thirds, and the migration takes about 20 s (ce serve
-- says so before it starts).

CREATE TABLE handoffs_v10 (
  handoff_id            TEXT PRIMARY KEY,
  owner_id              TEXT NOT NULL REFERENCES participants(participant_id),
  requested_assignee_id TEXT REFERENCES participants(participant_id),
  assignee_id           TEXT REFERENCES participants(participant_id),
  status                TEXT NOT NULL CHECK (status IN
                          ('open','accepted','result_ready','approved','rejected','cancelled')),
  summary               TEXT NOT NULL,
  constraints_text      TEXT,
  target                TEXT,
  base_version          INTEGER,
  follows_handoff_id    TEXT REFERENCES handoffs(handoff_id),
  artifacts_json        TEXT CHECK (artifacts_json IS NULL OR json_valid(artifacts_json)),
  idempotency_key       TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 128),
  request_sha256        BLOB,
  task_id               TEXT NOT NULL,
  result_json           TEXT CHECK (result_json IS NULL OR json_valid(result_json)),
  created_at            INTEGER NOT NULL,
  updated_at            INTEGER NOT NULL,
  accepted_at           INTEGER,
  result_at             INTEGER,
  decided_at            INTEGER,
  decided_by            TEXT REFERENCES participants(participant_id),
  decision_note         TEXT,
  cancelled_at          INTEGER,
  cancelled_by          TEXT REFERENCES participants(participant_id),
  cancel_reason         TEXT CHECK (cancel_reason IN ('requested','task_expired')),
  CHECK (assignee_id IS NULL OR assignee_id <> owner_id),
  CHECK (requested_assignee_id IS NULL OR requested_assignee_id <> owner_id),
  CHECK (status <> 'open' OR assignee_id IS NULL),
  CHECK (status IN ('open','cancelled') OR assignee_id IS NOT NULL),
  CHECK (status NOT IN ('result_ready','approved','rejected') OR result_json IS NOT NULL),
  CHECK (status NOT IN ('open','accepted') OR result_json IS NULL),
  CHECK ((status IN ('approved','rejected')) = (decided_at IS NOT NULL)),
  CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL AND cancel_reason IS NOT NULL))
) STRICT;
INSERT INTO handoffs_v10 SELECT * FROM handoffs;

DROP TABLE handoffs;
ALTER TABLE handoffs_v10 RENAME TO handoffs;
CREATE UNIQUE INDEX handoffs_idempotency ON handoffs(owner_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX handoffs_by_status_recent ON handoffs(status, created_at);
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

CREATE TABLE tasks_v10 (
  task_id          TEXT PRIMARY KEY,
  schema_version   INTEGER NOT NULL DEFAULT 1 CHECK (schema_version = 1),
  operation        TEXT NOT NULL DEFAULT 'handoff.execute' CHECK (operation = 'handoff.execute'),
  owner_id         TEXT NOT NULL REFERENCES participants(participant_id),
  assignee_id      TEXT REFERENCES participants(participant_id),
  correlation_id   TEXT NOT NULL REFERENCES handoffs(handoff_id),
  status           TEXT NOT NULL CHECK (status IN
                     ('working','input_required','completed','failed','cancelled')),
  status_message   TEXT,
  created_at       INTEGER NOT NULL,
  last_updated_at  INTEGER NOT NULL CHECK (last_updated_at >= created_at),
  ttl_ms           INTEGER NOT NULL DEFAULT 86400000 CHECK (ttl_ms > 0),
  poll_interval_ms INTEGER NOT NULL DEFAULT 5000 CHECK (poll_interval_ms > 0),
  result_json      TEXT CHECK (result_json IS NULL OR json_valid(result_json)),
  error_json       TEXT CHECK (error_json IS NULL OR json_valid(error_json)),
  CHECK ((status = 'completed') = (result_json IS NOT NULL)),
  CHECK ((status = 'failed')    = (error_json  IS NOT NULL))
) STRICT;
INSERT INTO tasks_v10 SELECT * FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_v10 RENAME TO tasks;
CREATE INDEX tasks_purge_due ON tasks(last_updated_at + ttl_ms)
  WHERE status IN ('completed','failed','cancelled');
CREATE INDEX tasks_expiry_due ON tasks(created_at + ttl_ms)
  WHERE status IN ('working','input_required');
