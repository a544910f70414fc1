-- Schema 1 of the Commonroom sidecar. Times are Unix milliseconds (UTC).
-- CHECK constraints make illegal states unrepresentable; the engine's
-- conditional updates are the first line, these are the last.

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE participants (
  participant_id TEXT PRIMARY KEY,
  kind           TEXT NOT NULL CHECK (kind IN ('human','agent')),
  name           TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
  capabilities   TEXT NOT NULL CHECK (json_valid(capabilities) AND json_type(capabilities) = 'array'),
  is_host        INTEGER NOT NULL DEFAULT 0 CHECK (is_host IN (0,1)),
  invite_id      TEXT,
  joined_at      INTEGER NOT NULL,
  last_seen_at   INTEGER NOT NULL,
  left_at        INTEGER,
  CHECK (is_host = 0 OR invite_id IS NULL)
) STRICT;
CREATE INDEX participants_present ON participants(joined_at) WHERE left_at IS NULL;

CREATE TABLE sessions (
  session_ref    TEXT PRIMARY KEY,
  token_sha256   BLOB NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  capabilities   TEXT NOT NULL CHECK (json_valid(capabilities) AND json_type(capabilities) = 'array'),
  transport      TEXT NOT NULL CHECK (length(transport) <= 64),
  issued_at      INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL CHECK (expires_at > issued_at),
  last_seen_at   INTEGER NOT NULL,
  ended_at       INTEGER,
  end_reason     TEXT CHECK (end_reason IN ('left','expired','replaced')),
  CHECK ((ended_at IS NULL) = (end_reason IS NULL))
) STRICT;
CREATE INDEX sessions_live ON sessions(expires_at) WHERE ended_at IS NULL;
CREATE INDEX sessions_by_participant ON sessions(participant_id) WHERE ended_at IS NULL;

CREATE TABLE invites (
  invite_id     TEXT PRIMARY KEY,
  secret_sha256 BLOB NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
  capabilities  TEXT NOT NULL CHECK (json_valid(capabilities) AND json_type(capabilities) = 'array'),
  target        TEXT,
  created_by    TEXT REFERENCES participants(participant_id),
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  max_uses      INTEGER CHECK (max_uses IS NULL OR max_uses >= 1),
  used_count    INTEGER NOT NULL DEFAULT 0 CHECK (used_count >= 0),
  revoked_at    INTEGER,
  lapsed_at     INTEGER, -- set when the sweeper recorded invite.expired
  CHECK (max_uses IS NULL OR used_count <= max_uses)
) STRICT;
CREATE INDEX invites_lapsing ON invites(expires_at) WHERE lapsed_at IS NULL AND revoked_at IS NULL;

CREATE TABLE versions (
  version        INTEGER PRIMARY KEY CHECK (version >= 1),
  content        TEXT NOT NULL,
  content_sha256 TEXT NOT NULL,
  summary        TEXT NOT NULL,
  source         TEXT NOT NULL CHECK (source IN ('bootstrap','raw_commit','proposal','external')),
  participant_id TEXT REFERENCES participants(participant_id),
  proposal_id    TEXT,
  created_at     INTEGER NOT NULL,
  CHECK (source NOT IN ('bootstrap','external') OR participant_id IS NULL),
  CHECK ((source = 'proposal') = (proposal_id IS NOT NULL))
) STRICT;

CREATE TABLE leases (
  lease_id         TEXT PRIMARY KEY,
  participant_id   TEXT NOT NULL REFERENCES participants(participant_id),
  target           TEXT NOT NULL,
  requested_target TEXT NOT NULL,
  acquired_at      INTEGER NOT NULL,
  expires_at       INTEGER NOT NULL CHECK (expires_at > acquired_at),
  released_at      INTEGER,
  release_reason   TEXT CHECK (release_reason IN ('released','expired','left','admin')),
  CHECK ((released_at IS NULL) = (release_reason IS NULL))
) STRICT;
CREATE UNIQUE INDEX leases_one_live_per_target ON leases(target) WHERE released_at IS NULL;
CREATE INDEX leases_live_expiry ON leases(expires_at) WHERE released_at IS NULL;

CREATE TABLE proposals (
  proposal_id       TEXT PRIMARY KEY,
  participant_id    TEXT NOT NULL REFERENCES participants(participant_id),
  target            TEXT NOT NULL,
  base_version      INTEGER NOT NULL REFERENCES versions(version),
  summary           TEXT NOT NULL,
  change_json       TEXT NOT NULL CHECK (json_valid(change_json) AND length(change_json) <= 262144),
  status            TEXT NOT NULL CHECK (status IN
                      ('pending','approved','rejected','committed','conflicted','superseded')),
  reviewed_by       TEXT REFERENCES participants(participant_id),
  reviewed_at       INTEGER,
  committed_version INTEGER REFERENCES versions(version),
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  CHECK ((status = 'committed') = (committed_version IS NOT NULL)),
  CHECK (status NOT IN ('approved','rejected','committed','conflicted') OR reviewed_by IS NOT NULL)
) STRICT;
CREATE INDEX proposals_pending ON proposals(base_version) WHERE status = 'pending';
CREATE INDEX proposals_recent ON proposals(created_at);

CREATE TABLE handoffs (
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
  task_id               TEXT NOT NULL UNIQUE,
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
CREATE UNIQUE INDEX handoffs_idempotency ON handoffs(owner_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX handoffs_by_status ON handoffs(status, updated_at);
CREATE INDEX handoffs_by_assignee ON handoffs(assignee_id, status);

CREATE TABLE tasks (
  task_id          TEXT PRIMARY KEY,
  schema_version   INTEGER NOT NULL DEFAULT 1 CHECK (schema_version = 1),
  operation        TEXT NOT NULL DEFAULT 'handoff.execute' CHECK (operation = 'handoff.execute'),
  owner_id         TEXT NOT NULL REFERENCES participants(participant_id),
  assignee_id      TEXT REFERENCES participants(participant_id),
  correlation_id   TEXT NOT NULL UNIQUE REFERENCES handoffs(handoff_id),
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
CREATE INDEX tasks_active   ON tasks(created_at)      WHERE status IN ('working','input_required');
CREATE INDEX tasks_terminal ON tasks(last_updated_at) WHERE status IN ('completed','failed','cancelled');

CREATE TABLE task_inputs (
  task_id       TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
  request_key   TEXT NOT NULL CHECK (length(request_key) BETWEEN 1 AND 64),
  request_json  TEXT NOT NULL CHECK (json_valid(request_json)),
  requested_by  TEXT NOT NULL REFERENCES participants(participant_id),
  requested_at  INTEGER NOT NULL,
  response_json TEXT CHECK (response_json IS NULL OR json_valid(response_json)),
  responded_by  TEXT REFERENCES participants(participant_id),
  closed_at     INTEGER,
  close_reason  TEXT CHECK (close_reason IN ('answered','superseded','cancelled')),
  CHECK ((closed_at IS NULL) = (close_reason IS NULL)),
  CHECK ((close_reason = 'answered') = (response_json IS NOT NULL)),
  PRIMARY KEY (task_id, request_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX task_inputs_outstanding ON task_inputs(task_id) WHERE closed_at IS NULL;

CREATE TABLE events (
  event_id     INTEGER PRIMARY KEY AUTOINCREMENT,
  event_type   TEXT NOT NULL,
  actor_id     TEXT,
  version      INTEGER,
  handoff_id   TEXT,
  task_id      TEXT,
  payload_json TEXT NOT NULL CHECK (json_valid(payload_json)),
  created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX events_by_handoff ON events(handoff_id, event_id) WHERE handoff_id IS NOT NULL;
