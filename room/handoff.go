package room

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Handoff statuses. A handoff is the request for work; its task is the
// execution record and approval is a separate decision, so these are not
// task statuses (the brief: "These are not one status field").
const (
	HandoffOpen        = "open"
	HandoffAccepted    = "accepted"
	HandoffResultReady = "result_ready"
	HandoffApproved    = "approved"
	HandoffRejected    = "rejected"
	HandoffCancelled   = "cancelled"
)

// Input request states as parties see them in Handoff.Inputs. "open" is an
// outstanding request; the others say how it was closed.
const (
	InputOpen       = "open"
	InputAnswered   = "answered"
	InputSuperseded = "superseded"
	InputCancelled  = "cancelled"
)

// HandoffOperation is the operation every task of this server executes.
const HandoffOperation = "handoff.execute"

// maxInputKeyChars bounds an input request key (D11).
const maxInputKeyChars = 64

// maxSchemaBytes bounds one requested_schema. The specs give no number; a
// form schema is a handful of primitive properties, and without a bound one
// request could store a megabyte per key.
const maxSchemaBytes = 16 << 10

// defaultInputSchema is the form asked for when a request names no schema:
// one free-text answer.
const defaultInputSchema = `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`

// Artifact is a reference to something a handoff or its result is about: a
// workspace URI, a proposal id, a version, or an external URL. Artifacts are
// stored as given and never fetched (the brief), so the room never becomes a
// proxy to other hosts.
type Artifact struct {
	URI       string `json:"uri" jsonschema:"what the artifact is: a commonroom:// URI, a proposal id, a version, or a URL (stored, never fetched)" schema:"required"`
	Title     string `json:"title,omitempty" jsonschema:"a short label"`
	MediaType string `json:"media_type,omitempty" jsonschema:"e.g. text/markdown"`
	Digest    string `json:"digest,omitempty" jsonschema:"e.g. sha256:…"`
}

// CreateHandoffInput is what handoff_create, POST /workspace/handoff and
// in-process callers send. The json tags are the tool's field names so every
// front door can decode straight into it.
type CreateHandoffInput struct {
	Summary          string     `json:"summary" jsonschema:"what needs doing (at most 2,000 characters)" schema:"required"`
	Constraints      string     `json:"constraints,omitempty" jsonschema:"how it must be done, limits, acceptance criteria (at most 8,000 characters)"`
	Assignee         string     `json:"assignee,omitempty" jsonschema:"participant id of who should do it; omit to let anyone with checkout accept"` // requested assignee, a participant id (D3)
	Target           string     `json:"target,omitempty" jsonschema:"a region of the document this is about (context only)"`                         // a region, context only, never enforced
	BaseVersion      *int64     `json:"base_version,omitempty" jsonschema:"the document version this refers to" schema:"minimum=1"`
	FollowsHandoffID string     `json:"follows_handoff_id,omitempty" jsonschema:"the handoff this re-does (e.g. after a rejection)"`                // D6: re-work links to what it follows
	IdempotencyKey   string     `json:"idempotency_key,omitempty" jsonschema:"repeat-safe key: the same key returns the original handoff and task"` // D9: scoped to the calling participant
	Artifacts        []Artifact `json:"artifacts,omitempty" jsonschema:"references the work starts from (at most 32)"`
}

// ResultInput is what the assignee delivers (D8). A tool-level failure is a
// completed task with IsError, never a failed one (the Tasks spec). It is also
// the shape of the copy kept on the handoff, which outlives the task row.
type ResultInput struct {
	Text      string     `json:"text" jsonschema:"the result (the whole result is at most 256 KiB)" schema:"required"`
	Artifacts []Artifact `json:"artifacts" jsonschema:"what you produced: proposal ids, versions, URIs (at most 32)"`
	IsError   bool       `json:"is_error" jsonschema:"true if the work could not be done; the task still completes"`
}

// InputRequestSpec is one question the assignee asks the owner
// (handoff_request_input). RequestedSchema is an MCP elicitation form schema;
// empty means one free-text "answer".
type InputRequestSpec struct {
	Key             string          `json:"key" jsonschema:"1..64 characters, never reused on this task" schema:"required"`
	Message         string          `json:"message" jsonschema:"the question (at most 2,000 characters)" schema:"required"`
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty" jsonschema:"an MCP elicitation form schema for the answer; default: one string field \"answer\""`
}

// HandoffInput is an input request as the handoff's parties see it: the
// question, and once answered, the answer. This is how the assignee reads
// the owner's answers (D11), since tasks/update only acknowledges.
type HandoffInput struct {
	Key             string          `json:"key"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requested_schema"`
	Response        json.RawMessage `json:"response"`
	Status          string          `json:"status"`
	RequestedAt     string          `json:"requested_at"`
	AnsweredAt      *string         `json:"answered_at"`
}

// Handoff is the one representation of a handoff on every front door
// (handoff_get, GET /workspace/handoff, ce handoff, the owner page). Optional
// values are null rather than absent so clients can rely on the keys.
type Handoff struct {
	HandoffID           string         `json:"handoff_id"`
	Status              string         `json:"status"`
	OwnerID             string         `json:"owner_id"`
	AssigneeID          *string        `json:"assignee_id"`
	RequestedAssigneeID *string        `json:"requested_assignee_id"`
	Summary             string         `json:"summary"`
	Constraints         *string        `json:"constraints"`
	Target              *string        `json:"target"`
	BaseVersion         *int64         `json:"base_version"`
	FollowsHandoffID    *string        `json:"follows_handoff_id"`
	Artifacts           []Artifact     `json:"artifacts"`
	TaskID              string         `json:"task_id"`
	TaskStatus          *string        `json:"task_status"` // null once the task row is purged
	Result              *ResultInput   `json:"result"`
	CreatedAt           string         `json:"created_at"`
	UpdatedAt           string         `json:"updated_at"`
	AcceptedAt          *string        `json:"accepted_at"`
	ResultAt            *string        `json:"result_at"`
	DecidedAt           *string        `json:"decided_at"`
	DecidedBy           *string        `json:"decided_by"`
	DecisionNote        *string        `json:"decision_note"`
	CancelledAt         *string        `json:"cancelled_at"`
	CancelledBy         *string        `json:"cancelled_by"`
	CancelReason        *string        `json:"cancel_reason"`
	Inputs              []HandoffInput `json:"inputs,omitzero"` // parties only (owner, assignee, admin); nil = not shown

	// Replayed marks the answer to a create that repeated an idempotency key (D9).
	Replayed bool `json:"replayed,omitempty"`
	// AlreadyCompleted marks a repeated handoff_complete by the assignee (D10):
	// the first result stands and nothing changed.
	AlreadyCompleted bool `json:"already_completed,omitempty"`
}

// CreateHandoffResult is what a create returns: the handoff and its task as
// committed, so the front door can answer with a task handle (CreateTaskResult)
// or a plain tool result without reading again.
type CreateHandoffResult struct {
	Handoff Handoff `json:"handoff"`
	// Task is nil only for a replay whose task row was already purged.
	Task *DetailedTask `json:"task"`
	// Replayed: the idempotency key was seen before; Handoff and Task are the originals.
	Replayed bool `json:"replayed,omitempty"`
	// TaskPurged: a replay after the task's retention ended. The front door
	// must answer with a plain tool result, not a task handle that tasks/get
	// could not resolve (D9).
	TaskPurged bool `json:"task_purged,omitempty"`
	// ArgumentsDiffer: a replay whose arguments differ from the original call's.
	// The original still wins (the brief); front doors log the mismatch.
	ArgumentsDiffer bool `json:"-"`
}

// ---- validation helpers ----

func runes(s string) int { return utf8.RuneCountInString(s) }

func tooLong(field string, max int) *Error {
	return Errorf(KindLimitExceeded, "%s is longer than %d characters", field, max).With("field", field).With("limit", max)
}

func invalid(field, format string, args ...any) *Error {
	return Errorf(KindInvalidRequest, format, args...).With("field", field)
}

// checkText validates an optional free-text field: UTF-8 and at most max code points.
func checkText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return invalid(field, "%s is not valid UTF-8", field)
	}
	if runes(s) > max {
		return tooLong(field, max)
	}
	return nil
}

// validateArtifacts checks a list of references. Every string in an
// artifact is bounded by the URI limit, so a list of 32 stays small.
func (e *Engine) validateArtifacts(field string, arts []Artifact) error {
	if len(arts) > e.Limits.MaxArtifacts {
		return Errorf(KindLimitExceeded, "at most %d artifacts are allowed", e.Limits.MaxArtifacts).
			With("field", field).With("limit", e.Limits.MaxArtifacts)
	}
	for i, a := range arts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if strings.TrimSpace(a.URI) == "" {
			return invalid(f+".uri", "%s.uri is required", f)
		}
		for name, v := range map[string]string{"uri": a.URI, "title": a.Title, "media_type": a.MediaType, "digest": a.Digest} {
			if err := checkText(f+"."+name, v, e.Limits.MaxArtifactURIChars); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeJSON is json.Marshal without HTML escaping, so a '<' in a result
// costs one byte against the size limit, not six.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func nonNilArtifacts(a []Artifact) []Artifact {
	if a == nil {
		return []Artifact{}
	}
	return a
}

// ---- events ----

// handoffEvent writes one event about a handoff or its task. Payloads carry
// ids, statuses, the actor and reasons only (D2, D13): never summaries,
// constraints, results or answers.
func (tx *Tx) handoffEvent(typ string, actor, handoffID, taskID string, extra map[string]any) error {
	payload := map[string]any{"handoff_id": handoffID, "task_id": taskID}
	if actor != "" {
		payload["actor_id"] = actor
	}
	for k, v := range extra {
		payload[k] = v
	}
	return tx.emit(typ, refs{actor: actor, handoff: handoffID, task: taskID}, payload)
}

// ---- create ----

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
	// Tasks past their TTL that the sweeper has not reached yet must not hold
	// slots (§5.3 step 2); if this command fails, the sweeper redoes it.
	if err := e.expireDueTasks(tx); err != nil {
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
	h, err := e.handoffInTx(tx, p, hid)
	if err != nil {
		return CreateHandoffResult{}, err
	}
	t, err := e.taskByID(tx.ctx, tx.q, tid)
	if err != nil {
		return CreateHandoffResult{}, err
	}
	return CreateHandoffResult{Handoff: h, Task: &t}, nil
}

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

// ---- accept ----

// AcceptHandoff takes on the work (D3). The first accept wins; the owner can
// never accept, and a handoff addressed to someone can be accepted only by
// them. The task stays working (there is no "accepted" task status) and
// records the assignee, which makes the task visible to them.
func (e *Engine) AcceptHandoff(tx *Tx, p Principal, in HandoffIDInput) (Handoff, error) {
	handoffID := in.HandoffID
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if ErrorKind(err) == KindHandoffNotFound {
		// An open call (addressed to nobody) was visible to every checkout
		// holder; one who lost the race to accept it, or finds it closed,
		// learns why (D3: handoff_conflict) rather than that it never existed.
		if row, lerr := loadHandoff(tx.ctx, tx.q, handoffID); lerr == nil && !row.requested.Valid {
			return Handoff{}, row.conflict("the handoff is %s; only an open handoff can be accepted", row.status)
		}
	}
	if err != nil {
		return Handoff{}, err
	}
	if p.ParticipantID == "" || p.ParticipantID == h.owner {
		return Handoff{}, Errorf(KindPermissionDenied, "the owner of a handoff cannot accept it").With("handoff_id", h.id)
	}
	if h.status != HandoffOpen {
		return Handoff{}, h.conflict("the handoff is %s; only an open handoff can be accepted", h.status)
	}
	if h.requested.Valid && h.requested.String != p.ParticipantID {
		return Handoff{}, h.conflict("the handoff is addressed to another participant")
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE handoffs SET status = 'accepted', assignee_id = ?, accepted_at = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'open'`, p.ParticipantID, now, now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff was accepted by someone else")
	}
	n, err = tx.execN(`UPDATE tasks SET assignee_id = ?, last_updated_at = ? WHERE task_id = ? AND status = 'working'`,
		p.ParticipantID, now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer working")
	}
	// One event: the task's status does not change, the handoff's does, and
	// the event names both records (task.* events mark task status changes).
	if err := tx.handoffEvent("handoff.accepted", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffAccepted, "assignee_id": p.ParticipantID, "task_status": TaskWorking,
	}); err != nil {
		return Handoff{}, err
	}
	tx.taskChanged(h.taskID)
	return e.handoffInTx(tx, p, h.id)
}

// ---- input requests ----

// RequestInput lets the assignee ask the owner questions while working
// (D11). Each request becomes an MCP elicitation/create form request on the
// task, which turns input_required; the owner answers with tasks/update.
// Keys are unique for the task's whole lifetime, as the Tasks spec requires.
func (e *Engine) RequestInput(tx *Tx, p Principal, in RequestInputInput) (Handoff, error) {
	handoffID, reqs := in.HandoffID, in.Requests
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if !h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "only the assignee can request input").With("handoff_id", h.id)
	}
	if h.status != HandoffAccepted || !h.taskLive() {
		return Handoff{}, h.conflict("the handoff is %s; input can be requested only while it is accepted", h.status)
	}
	if len(reqs) == 0 {
		return Handoff{}, invalid("requests", "requests must name at least one question")
	}
	var outstanding int
	if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM task_inputs WHERE task_id = ? AND closed_at IS NULL`, h.taskID).
		Scan(&outstanding); err != nil {
		return Handoff{}, Internal(err)
	}
	if outstanding+len(reqs) > e.Limits.MaxOpenInputs {
		return Handoff{}, Errorf(KindLimitExceeded, "a task may have at most %d outstanding input requests (%d are open)",
			e.Limits.MaxOpenInputs, outstanding).With("field", "requests").With("limit", e.Limits.MaxOpenInputs)
	}
	type stored struct{ key, request string }
	list := make([]stored, 0, len(reqs))
	seen := map[string]bool{}
	for i, r := range reqs {
		f := fmt.Sprintf("requests[%d]", i)
		if r.Key == "" || !utf8.ValidString(r.Key) {
			return Handoff{}, invalid(f+".key", "%s.key is required", f)
		}
		if runes(r.Key) > maxInputKeyChars {
			return Handoff{}, tooLong(f+".key", maxInputKeyChars)
		}
		if seen[r.Key] {
			return Handoff{}, invalid(f+".key", "key %q appears twice", r.Key).With("key", r.Key)
		}
		seen[r.Key] = true
		var used int
		if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM task_inputs WHERE task_id = ? AND request_key = ?`, h.taskID, r.Key).
			Scan(&used); err != nil {
			return Handoff{}, Internal(err)
		}
		if used > 0 {
			return Handoff{}, invalid(f+".key", "key %q was already used on this task; keys are never reused", r.Key).With("key", r.Key)
		}
		if strings.TrimSpace(r.Message) == "" {
			return Handoff{}, invalid(f+".message", "%s.message is required", f)
		}
		if err := checkText(f+".message", r.Message, e.Limits.MaxInputMessage); err != nil {
			return Handoff{}, err
		}
		schema, err := normaliseSchema(f+".requested_schema", r.RequestedSchema)
		if err != nil {
			return Handoff{}, err
		}
		req, err := encodeJSON(elicitation{Method: "elicitation/create", Params: elicitationParams{
			Mode: "form", Message: r.Message, RequestedSchema: schema}})
		if err != nil {
			return Handoff{}, Internal(err)
		}
		list = append(list, stored{r.Key, string(req)})
	}
	now := tx.nowMS()
	for _, s := range list {
		if _, err := tx.exec(`INSERT INTO task_inputs(task_id, request_key, request_json, requested_by, requested_at)
			VALUES (?, ?, ?, ?, ?)`, h.taskID, s.key, s.request, p.ParticipantID, now); err != nil {
			return Handoff{}, Internal(err)
		}
	}
	n, err := tx.execN(`UPDATE tasks SET status = 'input_required', last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	if _, err := tx.exec(`UPDATE handoffs SET updated_at = ? WHERE handoff_id = ?`, now, h.id); err != nil {
		return Handoff{}, Internal(err)
	}
	keys := make([]string, len(list))
	for i, s := range list {
		keys[i] = s.key
	}
	if err := tx.handoffEvent("handoff.input_requested", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffAccepted, "keys": keys, "outstanding": outstanding + len(list),
	}); err != nil {
		return Handoff{}, err
	}
	if h.taskStatus.String != TaskInputRequired {
		if err := tx.handoffEvent("task.input_required", p.ParticipantID, h.id, h.taskID, map[string]any{"status": TaskInputRequired}); err != nil {
			return Handoff{}, err
		}
	}
	tx.taskChanged(h.taskID)
	return e.handoffInTx(tx, p, h.id)
}

// elicitation is how an input request is stored and shown in a task's
// inputRequests: an MCP elicitation/create request in form mode.
type elicitation struct {
	Method string            `json:"method"`
	Params elicitationParams `json:"params"`
}

type elicitationParams struct {
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

// normaliseSchema checks a requested form schema (an object schema with
// properties, as MCP elicitation forms are) and compacts it.
func normaliseSchema(field string, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(defaultInputSchema), nil
	}
	if len(raw) > maxSchemaBytes {
		return nil, Errorf(KindLimitExceeded, "%s is larger than %d bytes", field, maxSchemaBytes).
			With("field", field).With("limit", maxSchemaBytes)
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" || s.Properties == nil {
		return nil, invalid(field, "%s must be a JSON object schema with \"type\":\"object\" and \"properties\"", field)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, invalid(field, "%s is not valid JSON", field)
	}
	return b.Bytes(), nil
}

// UpdateTask is tasks/update (and POST /workspace/task/update): the owner, or
// an admin, answers outstanding input requests. Responses to keys that are not
// outstanding are ignored, as the Tasks spec requires; a partial answer keeps
// the task input_required and the last one returns it to working. A terminal
// task acknowledges and changes nothing.
func (e *Engine) UpdateTask(tx *Tx, p Principal, in UpdateTaskInput) (Empty, error) {
	return Empty{}, e.updateTask(tx, p, in.TaskID, in.InputResponses)
}

func (e *Engine) updateTask(tx *Tx, p Principal, taskID string, responses map[string]json.RawMessage) error {
	t, err := e.taskForWrite(tx, p, taskID)
	if err != nil {
		return err
	}
	if !p.IsAdmin() && p.ParticipantID != t.owner {
		return Errorf(KindPermissionDenied, "only the task's owner can answer its input requests").With("task_id", t.id)
	}
	if t.status != TaskInputRequired {
		return nil // nothing is outstanding: working has none, terminal tasks never change
	}
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT request_key FROM task_inputs WHERE task_id = ? AND closed_at IS NULL`, t.id)
	if err != nil {
		return Internal(err)
	}
	open := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return Internal(err)
		}
		open[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Internal(err)
	}
	var answered []string
	for k := range responses {
		if open[k] {
			answered = append(answered, k)
		}
	}
	if len(answered) == 0 {
		return nil
	}
	sort.Strings(answered)
	compact := make(map[string]string, len(answered))
	for _, k := range answered { // validate every answer before writing any
		resp := bytes.TrimSpace(responses[k])
		f := "inputResponses." + k
		if len(resp) == 0 || resp[0] != '{' || !json.Valid(resp) {
			// An answer to an elicitation/create request is an ElicitResult: an object.
			return invalid(f, "the response for %q must be a JSON object (an ElicitResult)", k).With("key", k)
		}
		if len(resp) > e.Limits.MaxResultBytes {
			return Errorf(KindLimitExceeded, "the response for %q is larger than %d bytes", k, e.Limits.MaxResultBytes).
				With("field", f).With("limit", e.Limits.MaxResultBytes)
		}
		var b bytes.Buffer
		_ = json.Compact(&b, resp)
		compact[k] = b.String()
	}
	now := tx.nowMS()
	for _, k := range answered {
		n, err := tx.execN(`UPDATE task_inputs SET response_json = ?, responded_by = ?, closed_at = ?, close_reason = 'answered'
			WHERE task_id = ? AND request_key = ? AND closed_at IS NULL`, compact[k], nullStr(p.ParticipantID), now, t.id, k)
		if err != nil {
			return Internal(err)
		}
		if n != 1 {
			return Errorf(KindHandoffConflict, "input %q was closed concurrently", k).With("task_id", t.id)
		}
	}
	remaining := len(open) - len(answered)
	status := TaskInputRequired
	if remaining == 0 {
		status = TaskWorking
	}
	n, err := tx.execN(`UPDATE tasks SET status = ?, last_updated_at = ? WHERE task_id = ? AND status = 'input_required'`, status, now, t.id)
	if err != nil {
		return Internal(err)
	}
	if n != 1 {
		return Errorf(KindHandoffConflict, "the task changed concurrently").With("task_id", t.id)
	}
	if _, err := tx.exec(`UPDATE handoffs SET updated_at = ? WHERE handoff_id = ?`, now, t.handoffID); err != nil {
		return Internal(err)
	}
	if status == TaskWorking {
		if err := tx.handoffEvent("task.working", p.ParticipantID, t.handoffID, t.id, map[string]any{"status": TaskWorking}); err != nil {
			return err
		}
	}
	if err := tx.handoffEvent("handoff.input_received", p.ParticipantID, t.handoffID, t.id, map[string]any{
		"status": HandoffAccepted, "keys": answered, "outstanding": remaining,
	}); err != nil {
		return err
	}
	tx.taskChanged(t.id)
	return nil
}

// ---- complete ----

// CompleteHandoff delivers the result. The task completes with an MCP
// CallToolResult; the handoff becomes result_ready and keeps its own copy of
// the result, which outlives the task row. Outstanding questions are closed
// as superseded. A second completion by the assignee changes nothing and
// says so (already_completed, D10): the first result stands.
func (e *Engine) CompleteHandoff(tx *Tx, p Principal, in CompleteInput) (Handoff, error) {
	handoffID, result, statusMessage := in.HandoffID, in.Result, in.StatusMessage
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if !h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "only the assignee can complete a handoff").With("handoff_id", h.id)
	}
	switch h.status {
	case HandoffResultReady, HandoffApproved, HandoffRejected:
		out, err := e.handoffInTx(tx, p, h.id)
		out.AlreadyCompleted = true
		return out, err
	case HandoffAccepted:
	default:
		return Handoff{}, h.conflict("the handoff is %s; only an accepted handoff can be completed", h.status)
	}
	if !h.taskLive() {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	result.Artifacts = nonNilArtifacts(result.Artifacts)
	if !utf8.ValidString(result.Text) {
		return Handoff{}, invalid("result.text", "result.text is not valid UTF-8")
	}
	if result.Text == "" && len(result.Artifacts) == 0 {
		return Handoff{}, invalid("result.text", "a result needs text or at least one artifact")
	}
	if err := e.validateArtifacts("result.artifacts", result.Artifacts); err != nil {
		return Handoff{}, err
	}
	if err := checkText("status_message", statusMessage, e.Limits.MaxInputMessage); err != nil {
		return Handoff{}, err
	}
	copyJSON, err := encodeJSON(result)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if len(copyJSON) > e.Limits.MaxResultBytes {
		return Handoff{}, Errorf(KindLimitExceeded, "the result is %d bytes; the limit is %d", len(copyJSON), e.Limits.MaxResultBytes).
			With("field", "result").With("limit", e.Limits.MaxResultBytes)
	}
	toolResult, err := encodeJSON(map[string]any{
		"resultType":        "complete",
		"content":           []any{map[string]any{"type": "text", "text": result.Text}},
		"structuredContent": map[string]any{"handoff_id": h.id, "artifacts": result.Artifacts},
		"isError":           result.IsError,
	})
	if err != nil {
		return Handoff{}, Internal(err)
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE tasks SET status = 'completed', result_json = ?, status_message = ?, last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, string(toolResult), nullStr(statusMessage), now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'superseded' WHERE task_id = ? AND closed_at IS NULL`,
		now, h.taskID); err != nil {
		return Handoff{}, Internal(err)
	}
	n, err = tx.execN(`UPDATE handoffs SET status = 'result_ready', result_json = ?, result_at = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'accepted'`, string(copyJSON), now, now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff changed concurrently")
	}
	if err := tx.handoffEvent("task.completed", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": TaskCompleted, "is_error": result.IsError,
	}); err != nil {
		return Handoff{}, err
	}
	if err := tx.handoffEvent("handoff.result_ready", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffResultReady, "is_error": result.IsError,
	}); err != nil {
		return Handoff{}, err
	}
	tx.taskChanged(h.taskID)
	return e.handoffInTx(tx, p, h.id)
}

// ---- approve / reject ----

// ApproveHandoff accepts the delivered result. It is a decision on the
// handoff only: the task stays completed and is never rewritten. The assignee
// may not judge their own work even when they hold approve (D12).
func (e *Engine) ApproveHandoff(tx *Tx, p Principal, in DecideInput) (Handoff, error) {
	return e.decide(tx, p, in.HandoffID, in.Note, HandoffApproved)
}

// RejectHandoff refuses the delivered result. Rejected is final; re-work is
// a new handoff that names this one in follows_handoff_id (D6).
func (e *Engine) RejectHandoff(tx *Tx, p Principal, in DecideInput) (Handoff, error) {
	return e.decide(tx, p, in.HandoffID, in.Note, HandoffRejected)
}

func (e *Engine) decide(tx *Tx, p Principal, handoffID, note, status string) (Handoff, error) {
	if err := p.Require(CapApprove); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "the assignee cannot decide on their own result").With("handoff_id", h.id)
	}
	if h.status != HandoffResultReady {
		return Handoff{}, h.conflict("the handoff is %s; only a result_ready handoff can be decided", h.status)
	}
	if err := checkText("note", note, e.Limits.MaxSummaryChars); err != nil {
		return Handoff{}, err
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE handoffs SET status = ?, decided_at = ?, decided_by = ?, decision_note = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'result_ready'`, status, now, nullStr(p.ParticipantID), nullStr(note), now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff was decided concurrently")
	}
	if err := tx.handoffEvent("handoff."+status, p.ParticipantID, h.id, h.taskID, map[string]any{"status": status}); err != nil {
		return Handoff{}, err
	}
	return e.handoffInTx(tx, p, h.id)
}

// ---- cancel ----

// CancelTask is tasks/cancel, POST /workspace/task/cancel and ce task-cancel:
// the owner, or an admin, stops the work. A terminal task acknowledges and
// stays as it was; a live one is cancelled, its open questions closed, and its
// open or accepted handoff cancelled, all before the acknowledgement.
// Cancelling records a decision; it cannot undo what the assignee already did.
func (e *Engine) CancelTask(tx *Tx, p Principal, in TaskIDInput) (Empty, error) {
	return Empty{}, e.cancelTask(tx, p, in.TaskID)
}

func (e *Engine) cancelTask(tx *Tx, p Principal, taskID string) error {
	t, err := e.taskForWrite(tx, p, taskID)
	if err != nil {
		return err
	}
	if !p.IsAdmin() && p.ParticipantID != t.owner {
		return Errorf(KindPermissionDenied, "only the task's owner can cancel it").With("task_id", t.id)
	}
	if t.status != TaskWorking && t.status != TaskInputRequired {
		return nil
	}
	_, err = cancelLiveTask(tx, p.ParticipantID, t.id, t.handoffID)
	return err
}

// cancelLiveTask is the one way a request cancels work, shared by CancelTask
// and CancelParticipantHandoffs so both write the same rows, events and
// notifications: the task becomes cancelled, its open questions close, its
// open or accepted handoff is cancelled by actor. It reports false when the
// task had already reached a terminal state (nothing changed).
func cancelLiveTask(tx *Tx, actor, taskID, handoffID string) (bool, error) {
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE tasks SET status = 'cancelled', status_message = 'cancelled on request', last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, now, taskID)
	if err != nil {
		return false, Internal(err)
	}
	if n != 1 {
		return false, nil // it reached a terminal state first: the ack is still true
	}
	if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'cancelled' WHERE task_id = ? AND closed_at IS NULL`,
		now, taskID); err != nil {
		return false, Internal(err)
	}
	if err := tx.handoffEvent("task.cancelled", actor, handoffID, taskID, map[string]any{
		"status": TaskCancelled, "reason": "requested",
	}); err != nil {
		return false, err
	}
	n, err = tx.execN(`UPDATE handoffs SET status = 'cancelled', cancelled_at = ?, cancelled_by = ?, cancel_reason = 'requested', updated_at = ?
		WHERE handoff_id = ? AND status IN ('open','accepted')`, now, nullStr(actor), now, handoffID)
	if err != nil {
		return false, Internal(err)
	}
	if n == 1 {
		if err := tx.handoffEvent("handoff.cancelled", actor, handoffID, taskID, map[string]any{
			"status": HandoffCancelled, "reason": "requested",
		}); err != nil {
			return false, err
		}
	}
	tx.taskChanged(taskID)
	return true, nil
}

// ---- loading for writes ----

// handoffForWrite loads a handoff inside the command, applying a TTL expiry
// that fell due before the sweeper ran (§5.3 step 2), and hides it from
// principals who may not see it. If the command then fails, the expiry rolls
// back with it and the sweeper applies it moments later; the caller has
// already been answered from the expired state.
func (e *Engine) handoffForWrite(tx *Tx, p Principal, id string) (*handoffRow, error) {
	h, err := loadHandoff(tx.ctx, tx.q, id)
	if err != nil {
		return nil, err
	}
	if h.taskDue(tx.nowMS()) {
		if err := e.expireTask(tx, h.taskID, h.id); err != nil {
			return nil, err
		}
		if h, err = loadHandoff(tx.ctx, tx.q, id); err != nil {
			return nil, err
		}
	}
	if !h.visibleTo(p) {
		return nil, handoffNotFound(id)
	}
	return h, nil
}

// handoffInTx is the handoff as p sees it, read inside the command.
func (e *Engine) handoffInTx(tx *Tx, p Principal, id string) (Handoff, error) {
	h, err := loadHandoff(tx.ctx, tx.q, id)
	if err != nil {
		return Handoff{}, err
	}
	return h.view(tx.ctx, tx.q, p)
}

// taskRow is the part of a task the write rules look at.
type taskRow struct {
	id, owner, handoffID, status string
	assignee                     sql.NullString
}

func loadTask(tx *Tx, id string) (*taskRow, error) {
	var t taskRow
	err := tx.q.QueryRowContext(tx.ctx, `SELECT task_id, owner_id, assignee_id, correlation_id, status FROM tasks WHERE task_id = ?`, id).
		Scan(&t.id, &t.owner, &t.assignee, &t.handoffID, &t.status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	return &t, nil
}

// taskForWrite loads a task for tasks/update or tasks/cancel: expiry first
// (as for handoffs), then the party rule, with unknown and invisible alike.
func (e *Engine) taskForWrite(tx *Tx, p Principal, id string) (*taskRow, error) {
	if err := e.expireTaskIfDue(tx, id); err != nil {
		return nil, err
	}
	t, err := loadTask(tx, id)
	if err != nil {
		return nil, err
	}
	if !taskVisible(p, t.owner, t.assignee.String) {
		return nil, taskNotFound(id)
	}
	return t, nil
}

// taskVisible is D2's one predicate for tasks: owner, assignee, or admin.
func taskVisible(p Principal, owner, assignee string) bool {
	if p.IsAdmin() {
		return true
	}
	return p.ParticipantID != "" && (p.ParticipantID == owner || p.ParticipantID == assignee)
}

// taskNotFound is the one answer for unknown and invisible tasks. It must not
// depend on anything but the id asked for, so it cannot be used to probe.
func taskNotFound(id string) *Error {
	return Errorf(KindTaskNotFound, "unknown task").With("task_id", id)
}

// handoffNotFound is the one answer for unknown and invisible handoffs.
func handoffNotFound(id string) *Error {
	return Errorf(KindHandoffNotFound, "unknown handoff").With("handoff_id", id)
}

var handoffStatuses = []string{HandoffOpen, HandoffAccepted, HandoffResultReady, HandoffApproved, HandoffRejected, HandoffCancelled}

func validHandoffStatus(s string) bool { return slices.Contains(handoffStatuses, s) }
