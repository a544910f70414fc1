package room

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	HandoffID           string     `json:"handoff_id"`
	Status              string     `json:"status"`
	OwnerID             string     `json:"owner_id"`
	AssigneeID          *string    `json:"assignee_id"`
	RequestedAssigneeID *string    `json:"requested_assignee_id"`
	Summary             string     `json:"summary"`
	Constraints         *string    `json:"constraints"`
	Target              *string    `json:"target"`
	BaseVersion         *int64     `json:"base_version"`
	FollowsHandoffID    *string    `json:"follows_handoff_id"`
	Artifacts           []Artifact `json:"artifacts"`
	TaskID              string     `json:"task_id"`
	TaskStatus          *string    `json:"task_status"` // null once the task row is purged
	// PollIntervalMs is the task's poll interval while the task is live
	// (working or input_required), null once it is not: an agent that
	// cannot listen reads the handoff again after this many milliseconds.
	PollIntervalMs *int64         `json:"poll_interval_ms"`
	Result         *ResultInput   `json:"result"`
	CreatedAt      string         `json:"created_at"`
	UpdatedAt      string         `json:"updated_at"`
	AcceptedAt     *string        `json:"accepted_at"`
	ResultAt       *string        `json:"result_at"`
	DecidedAt      *string        `json:"decided_at"`
	DecidedBy      *string        `json:"decided_by"`
	DecisionNote   *string        `json:"decision_note"`
	CancelledAt    *string        `json:"cancelled_at"`
	CancelledBy    *string        `json:"cancelled_by"`
	CancelReason   *string        `json:"cancel_reason"`
	Inputs         []HandoffInput `json:"inputs,omitzero"` // parties only (owner, assignee, admin); nil = not shown

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

func nonNilArtifacts(a []Artifact) []Artifact {
	if a == nil {
		return []Artifact{}
	}
	return a
}

// handoffEvent records one event about a handoff or its task. Payloads
// carry ids, statuses, the actor and reasons only (D2, D13): never
// summaries, constraints, results or answers.
func (tx *Tx) handoffEvent(typ string, actor, handoffID, taskID string, extra map[string]any) error {
	// extra is the caller's own fresh map: the common keys go into it
	// rather than into a copy, and a key extra already holds keeps its
	// value, as when extra was copied over them.
	payload := extra
	if payload == nil {
		payload = make(map[string]any, 4)
	}
	common := [...]struct {
		k string
		v string
	}{{"handoff_id", handoffID}, {"task_id", taskID}, {"actor_id", actor}}
	for _, c := range common {
		if _, ok := payload[c.k]; !ok && (c.k != "actor_id" || actor != "") {
			payload[c.k] = c.v
		}
	}
	return tx.emit(typ, refs{actor: actor, handoff: handoffID, task: taskID}, payload)
}

var handoffStatuses = []string{HandoffOpen, HandoffAccepted, HandoffResultReady, HandoffApproved, HandoffRejected, HandoffCancelled}

func validHandoffStatus(s string) bool { return slices.Contains(handoffStatuses, s) }

// HandoffStatuses are the statuses a handoff can have, in lifecycle order:
// the closed set a listing filters by (ListHandoffsInput.Status).
func HandoffStatuses() []string { return slices.Clone(handoffStatuses) }
