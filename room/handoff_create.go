package room

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
)

// createHash fingerprints the arguments of a create (D9) so a replay with
// different arguments can be told apart from an honest retry.
func createHash(in CreateHandoffInput) []byte {
	b, _ := json.Marshal(struct {
		Summary, Constraints, Assignee, Target string
		BaseVersion                            *int64
		Follows                                string
		Artifacts                              []Artifact
	}{in.Summary, in.Constraints, in.Assignee, in.Target, in.BaseVersion, in.FollowsHandoffID, nonNilArtifacts(in.Artifacts)})
	h := sha256.Sum256(b)
	return h[:]
}

// CreateHandoff asks for work. One command writes the handoff, its task
// (working) and both events, so the task handle a client receives is already
// durable. Repeating an idempotency key returns the original handoff and
// task, whatever the new arguments are, and is answered before the
// active-task caps (the room's and the participant's share) so a retry at a
// cap still finds its work (D9, D33).
func (e *Engine) CreateHandoff(tx *Tx, p Principal, in CreateHandoffInput) (CreateHandoffResult, error) {
	if err := p.Require(CapPropose); err != nil {
		return CreateHandoffResult{}, err
	}
	if p.ParticipantID == "" {
		return CreateHandoffResult{}, Errorf(KindInvalidRequest, "a handoff needs a participant as its owner")
	}
	if in.IdempotencyKey != "" {
		if err := checkText("idempotency_key", in.IdempotencyKey, e.Limits.MaxIdempotencyChars); err != nil {
			return CreateHandoffResult{}, err
		}
		res, found, err := e.replayCreate(tx, p, in)
		if err != nil || found {
			return res, err
		}
	}
	if err := e.validateCreate(tx, p, in); err != nil {
		return CreateHandoffResult{}, err
	}
	if err := e.checkActiveTaskCaps(tx, p); err != nil {
		return CreateHandoffResult{}, err
	}

	hid, tid := newID("handoff", 16), newID("task", 16)
	now := tx.nowMS()
	var artifacts any
	if len(in.Artifacts) > 0 {
		b, err := encodeJSON(in.Artifacts)
		if err != nil {
			return CreateHandoffResult{}, Internal(err)
		}
		artifacts = string(b)
	}
	stored := len(in.Summary) + len(in.Constraints) + len(in.Target) + len(in.FollowsHandoffID)
	if s, ok := artifacts.(string); ok {
		stored += len(s)
	}
	if err := e.chargeStorage(tx, p.ParticipantID, stored); err != nil {
		return CreateHandoffResult{}, err
	}
	var base any
	if in.BaseVersion != nil {
		base = *in.BaseVersion
	}
	if _, err := tx.exec(`INSERT INTO handoffs(handoff_id, owner_id, requested_assignee_id, status, summary, constraints_text,
		target, base_version, follows_handoff_id, artifacts_json, idempotency_key, request_sha256, task_id, created_at, updated_at)
		VALUES (?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		hid, p.ParticipantID, nullStr(in.Assignee), in.Summary, nullStr(in.Constraints), nullStr(in.Target), base,
		nullStr(in.FollowsHandoffID), artifacts, nullStr(in.IdempotencyKey), createHash(in), tid, now, now); err != nil {
		return CreateHandoffResult{}, Internal(err)
	}
	if _, err := tx.exec(`INSERT INTO tasks(task_id, schema_version, operation, owner_id, correlation_id, status,
		created_at, last_updated_at, ttl_ms, poll_interval_ms) VALUES (?, 1, ?, ?, ?, 'working', ?, ?, ?, ?)`,
		tid, HandoffOperation, p.ParticipantID, hid, now, now,
		e.Limits.TaskTTL.Milliseconds(), e.Limits.TaskPollInterval.Milliseconds()); err != nil {
		return CreateHandoffResult{}, Internal(err)
	}
	extra := map[string]any{"status": HandoffOpen, "owner_id": p.ParticipantID}
	if in.Assignee != "" {
		extra["requested_assignee_id"] = in.Assignee
	}
	if in.FollowsHandoffID != "" {
		extra["follows_handoff_id"] = in.FollowsHandoffID
	}
	if err := tx.handoffEvent("handoff.created", p.ParticipantID, hid, tid, extra); err != nil {
		return CreateHandoffResult{}, err
	}
	if err := tx.handoffEvent("task.created", p.ParticipantID, hid, tid, map[string]any{"status": TaskWorking}); err != nil {
		return CreateHandoffResult{}, err
	}
	tx.taskChanged(tid)
	// The handoff and its task exactly as the INSERTs wrote them, rendered
	// without reading them back; the task's notice reuses the same snapshot.
	row := &handoffRow{id: hid, status: HandoffOpen, owner: p.ParticipantID,
		requested: nullString(in.Assignee), summary: in.Summary, constraints: nullString(in.Constraints),
		target: nullString(in.Target), follows: nullString(in.FollowsHandoffID), taskID: tid,
		created: now, updated: now, taskStatus: sql.NullString{String: TaskWorking, Valid: true},
		taskDueAt: sql.NullInt64{Int64: now + e.Limits.TaskTTL.Milliseconds(), Valid: true},
		taskPoll:  sql.NullInt64{Int64: e.Limits.TaskPollInterval.Milliseconds(), Valid: true}, noInputs: true}
	if in.BaseVersion != nil {
		row.baseVersion = sql.NullInt64{Int64: *in.BaseVersion, Valid: true}
	}
	if s, ok := artifacts.(string); ok {
		row.artifacts = sql.NullString{String: s, Valid: true}
	}
	row.task = taskCols{created: sql.NullInt64{Int64: now, Valid: true},
		ttl:   sql.NullInt64{Int64: e.Limits.TaskTTL.Milliseconds(), Valid: true},
		owner: sql.NullString{String: p.ParticipantID, Valid: true}}
	tx.keepHandoff(row, 2) // the handoff and its task
	tx.startsLive(tid, liveTask{owner: p.ParticipantID, due: now + e.Limits.TaskTTL.Milliseconds()})
	h, err := row.view(tx.ctx, tx.q, p)
	if err != nil {
		return CreateHandoffResult{}, err
	}
	t := DetailedTask{TaskID: tid, Status: TaskWorking, CreatedAt: WireTime(now), LastUpdatedAt: WireTime(now),
		TTLMs: e.Limits.TaskTTL.Milliseconds(), PollIntervalMs: e.Limits.TaskPollInterval.Milliseconds(),
		Meta: map[string]any{HandoffMetaKey: hid}, OwnerID: p.ParticipantID}
	tx.snapshot(t)
	return CreateHandoffResult{Handoff: h, Task: &t}, nil
}

// nullString is s as a nullable column: NULL when empty, as nullStr writes it.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// replayCreate answers a create whose (owner, idempotency key) was seen before.
func (e *Engine) replayCreate(tx *Tx, p Principal, in CreateHandoffInput) (CreateHandoffResult, bool, error) {
	var hid, tid string
	var hash []byte
	err := tx.q.QueryRowContext(tx.ctx, `SELECT handoff_id, task_id, request_sha256 FROM handoffs
		WHERE owner_id = ? AND idempotency_key = ?`, p.ParticipantID, in.IdempotencyKey).Scan(&hid, &tid, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return CreateHandoffResult{}, false, nil
	}
	if err != nil {
		return CreateHandoffResult{}, false, Internal(err)
	}
	// The original may have outlived its TTL unswept: show it as it really is.
	if err := e.expireTaskIfDue(tx, tid); err != nil {
		return CreateHandoffResult{}, false, err
	}
	h, err := e.handoffInTx(tx, p, hid)
	if err != nil {
		return CreateHandoffResult{}, false, err
	}
	h.Replayed = true
	res := CreateHandoffResult{Handoff: h, Replayed: true, ArgumentsDiffer: !bytes.Equal(hash, createHash(in))}
	t, err := e.taskByID(tx.ctx, tx.q, tid)
	switch {
	case err == nil:
		res.Task = &t
	case ErrorKind(err) == KindTaskNotFound:
		res.TaskPurged = true
	default:
		return CreateHandoffResult{}, false, err
	}
	return res, true, nil
}

func (e *Engine) validateCreate(tx *Tx, p Principal, in CreateHandoffInput) error {
	if strings.TrimSpace(in.Summary) == "" {
		return invalid("summary", "summary is required: say what you are asking for")
	}
	if err := checkText("summary", in.Summary, e.Limits.MaxSummaryChars); err != nil {
		return err
	}
	if err := checkText("constraints", in.Constraints, e.Limits.MaxConstraintsChars); err != nil {
		return err
	}
	if err := e.validateArtifacts("artifacts", in.Artifacts); err != nil {
		return err
	}
	if in.Assignee != "" {
		if in.Assignee == p.ParticipantID {
			return invalid("assignee", "you cannot hand work to yourself")
		}
		var capsText string
		var left sql.NullInt64
		err := tx.q.QueryRowContext(tx.ctx, `SELECT capabilities, left_at FROM participants WHERE participant_id = ?`, in.Assignee).
			Scan(&capsText, &left)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && left.Valid) {
			return invalid("assignee", "assignee is not a participant of this room").With("assignee", in.Assignee)
		}
		if err != nil {
			return Internal(err)
		}
		caps, err := capsFromJSON(capsText)
		if err != nil {
			return err
		}
		if !caps.Has(CapCheckout) {
			return invalid("assignee", "assignee cannot accept work: it lacks the checkout capability").With("assignee", in.Assignee)
		}
	}
	if in.Target != "" {
		d, err := e.CurrentDoc(tx.ctx, tx.q)
		if err != nil {
			return err
		}
		if _, _, err := d.FindSection(in.Target); err != nil {
			return Errorf(KindInvalidRegion, "target %q is not a section of the document", in.Target).
				With("region", in.Target).With("field", "target")
		}
	}
	if in.BaseVersion != nil {
		cur, err := currentVersion(tx.ctx, tx.q)
		if err != nil {
			return err
		}
		if *in.BaseVersion < 1 || *in.BaseVersion > cur {
			return Errorf(KindVersionNotFound, "version %d does not exist", *in.BaseVersion).
				With("base_version", *in.BaseVersion).With("current_version", cur).With("field", "base_version")
		}
	}
	if in.FollowsHandoffID != "" {
		h, err := loadHandoff(tx.ctx, tx.q, in.FollowsHandoffID)
		if err != nil && ErrorKind(err) != KindHandoffNotFound {
			return err
		}
		if err != nil || !h.visibleTo(p) {
			// Unknown and invisible read the same: ids are not a way to probe.
			return invalid("follows_handoff_id", "follows_handoff_id does not name a handoff you can see")
		}
	}
	return nil
}
