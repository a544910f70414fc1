package crashtest

import (
	"fmt"
	"net/url"
	"sync"
)

// ackKind names an acknowledged mutation: a request answered 2xx.
type ackKind string

const (
	ackJoin          ackKind = "join"
	ackInvite        ackKind = "invite"
	ackCreate        ackKind = "handoff.create"
	ackAccept        ackKind = "handoff.accept"
	ackRequestInput  ackKind = "handoff.request_input"
	ackAnswer        ackKind = "task.update"
	ackComplete      ackKind = "handoff.complete"
	ackApprove       ackKind = "handoff.approve"
	ackReject        ackKind = "handoff.reject"
	ackCancel        ackKind = "task.cancel"
	ackPropose       ackKind = "proposal.propose"
	ackReviewApprove ackKind = "proposal.approve"
	ackReviewReject  ackKind = "proposal.reject"
	ackCommit        ackKind = "proposal.commit"
	ackRawCommit     ackKind = "raw_commit"
)

// ack is what an acknowledged mutation must have produced.
type ack struct {
	kind    ackKind
	gen     int    // the generation that acknowledged it
	id      string // handoff, proposal, session_ref or invite id
	task    string
	who     string // participant id of the actor
	token   string // a session that may read the record (owner's for handoffs)
	keys    []string
	answers map[string]string // key -> compact JSON sent (task.update)
	text    *string           // result text (handoff.complete, unless already completed)
	version int64
	sha     string // content hash of a committed version
}

// ledger records every acknowledgement, in order.
type ledger struct {
	mu   sync.Mutex
	acks []*ack
}

func (l *ledger) add(a *ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

// since returns the acknowledgements from index i on (a copy of the slice header).
func (l *ledger) since(i int) []*ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks[min(i, len(l.acks)):len(l.acks):len(l.acks)]
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// verifyDB checks one acknowledgement against a snapshot taken after it.
func (a *ack) verifyDB(s *snapshot) []string {
	var v []string
	bad := func(format string, args ...any) {
		v = append(v, fmt.Sprintf("%s %s (acknowledged on gen %d): ", a.kind, a.id, a.gen)+fmt.Sprintf(format, args...))
	}
	handoff := func() *handoffRow {
		h, ok := s.handoffs[a.id]
		if !ok {
			bad("the handoff is gone")
			return nil
		}
		return h
	}
	switch a.kind {
	case ackJoin:
		pid, ok := s.sessions[a.id]
		if !ok {
			bad("the session is gone (or ended)")
		} else if pid != a.who {
			bad("the session belongs to %s, not %s", pid, a.who)
		}
		if !s.participants[a.who] {
			bad("participant %s is gone", a.who)
		}
	case ackInvite:
		if !s.invites[a.id] {
			bad("the invitation is gone")
		}
	case ackCreate:
		if h := handoff(); h != nil {
			if h.owner != a.who || h.taskID != a.task {
				bad("owner %s task %s, acknowledged owner %s task %s", h.owner, h.taskID, a.who, a.task)
			}
			if _, ok := s.tasks[a.task]; !ok {
				bad("its task %s is gone", a.task)
			}
		}
	case ackAccept:
		if h := handoff(); h != nil {
			if !reachable(handoffNext, "accepted", h.status) {
				bad("status %s is not reachable from accepted", h.status)
			}
			if h.assignee != a.who {
				bad("assignee %q, acknowledged %q", h.assignee, a.who)
			}
		}
	case ackRequestInput:
		if h := handoff(); h != nil && !reachable(handoffNext, "accepted", h.status) {
			bad("status %s is not reachable from accepted", h.status)
		}
		for _, k := range a.keys {
			in, ok := s.inputs[a.task][k]
			if !ok {
				bad("input request %q of task %s is gone", k, a.task)
			} else if in.requestedBy != a.who {
				bad("input request %q was asked by %s, acknowledged %s", k, in.requestedBy, a.who)
			}
		}
	case ackAnswer:
		for _, k := range a.keys {
			in, ok := s.inputs[a.task][k]
			switch {
			case !ok:
				bad("input request %q of task %s is gone", k, a.task)
			case !in.closed:
				bad("input request %q is still outstanding after an acknowledged answer", k)
			case in.reason == "answered" && in.respondedBy == a.who && in.response != a.answers[k]:
				bad("input %q was answered with %s, acknowledged %s", k, in.response, a.answers[k])
			}
		}
	case ackComplete:
		if h := handoff(); h != nil {
			if !reachable(handoffNext, "result_ready", h.status) {
				bad("status %s is not reachable from result_ready", h.status)
			}
			if a.text != nil && (h.resultText == nil || *h.resultText != *a.text) {
				bad("result text %v, acknowledged %q", h.resultText, *a.text)
			}
			if t, ok := s.tasks[a.task]; ok && t.status != "completed" {
				bad("task %s is %s after an acknowledged completion", a.task, t.status)
			}
		}
	case ackApprove, ackReject:
		want := map[ackKind]string{ackApprove: "approved", ackReject: "rejected"}[a.kind]
		if h := handoff(); h != nil {
			if h.status != want || h.decidedBy != a.who {
				bad("status %s decided by %q, acknowledged %s by %s", h.status, h.decidedBy, want, a.who)
			}
		}
	case ackCancel:
		t, ok := s.tasks[a.task]
		if !ok {
			bad("task %s is gone", a.task)
		} else if !terminalTask(t.status) {
			bad("task %s is %s after an acknowledged cancel", a.task, t.status)
		}
	case ackPropose, ackReviewApprove, ackReviewReject:
		p, ok := s.proposals[a.id]
		if !ok {
			bad("the proposal is gone")
			break
		}
		from := map[ackKind]string{ackPropose: "pending", ackReviewApprove: "approved", ackReviewReject: "rejected"}[a.kind]
		if !reachable(proposalNext, from, p.status) {
			bad("status %s is not reachable from %s", p.status, from)
		}
		if a.kind == ackPropose && p.participant != a.who {
			bad("proposed by %s, acknowledged %s", p.participant, a.who)
		}
	case ackCommit, ackRawCommit:
		ver, ok := s.versions[a.version]
		if !ok {
			bad("version %d is gone", a.version)
			break
		}
		if ver.realSHA != a.sha {
			bad("version %d holds content %s, acknowledged %s", a.version, ver.realSHA, a.sha)
		}
		if a.kind == ackCommit {
			p, ok := s.proposals[a.id]
			if !ok || p.status != "committed" || p.committedVersion != a.version || ver.prop != a.id || ver.source != "proposal" {
				bad("version %d (source %s, proposal %q) / proposal %+v disagree with the acknowledged commit", a.version, ver.source, ver.prop, p)
			}
		} else if ver.source != "raw_commit" || ver.participant != a.who {
			bad("version %d has source %s by %q, acknowledged a raw commit by %s", a.version, ver.source, ver.participant, a.who)
		}
	}
	return v
}

// apiHandoff is the part of a handoff the checks read through the API.
type apiHandoff struct {
	HandoffID  string  `json:"handoff_id"`
	Status     string  `json:"status"`
	OwnerID    string  `json:"owner_id"`
	AssigneeID *string `json:"assignee_id"`
	TaskID     string  `json:"task_id"`
	TaskStatus *string `json:"task_status"`
	DecidedBy  *string `json:"decided_by"`
	Result     *struct {
		Text string `json:"text"`
	} `json:"result"`
	Inputs []struct {
		Key    string `json:"key"`
		Status string `json:"status"`
	} `json:"inputs"`
	AlreadyCompleted bool `json:"already_completed"`
	Replayed         bool `json:"replayed"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// verifyAPI checks one acknowledgement through the HTTP API: what a client
// recovering after the crash would read. s is a snapshot taken with the
// clients paused, so the API must agree with it exactly.
func (a *ack) verifyAPI(get func(token, path string, out any) error, s *snapshot) []string {
	var v []string
	bad := func(format string, args ...any) {
		v = append(v, fmt.Sprintf("API: %s %s (acknowledged on gen %d): ", a.kind, a.id, a.gen)+fmt.Sprintf(format, args...))
	}
	switch a.kind {
	case ackCreate, ackAccept, ackRequestInput, ackAnswer, ackComplete, ackApprove, ackReject, ackCancel:
		id := a.id
		var h apiHandoff
		if err := get(a.token, "/workspace/handoff?handoff_id="+url.QueryEscape(id), &h); err != nil {
			bad("GET /workspace/handoff: %v", err)
			return v
		}
		row := s.handoffs[id]
		if row == nil {
			bad("the API shows a handoff the sidecar does not have")
			return v
		}
		if h.Status != row.status || h.TaskID != row.taskID || str(h.AssigneeID) != row.assignee || str(h.DecidedBy) != row.decidedBy {
			bad("the API shows %s/%s/%s/%s, the sidecar %s/%s/%s/%s", h.Status, h.TaskID, str(h.AssigneeID), str(h.DecidedBy),
				row.status, row.taskID, row.assignee, row.decidedBy)
		}
		if t, ok := s.tasks[row.taskID]; ok && str(h.TaskStatus) != t.status {
			bad("the API shows task status %q, the sidecar %q", str(h.TaskStatus), t.status)
		}
		if a.kind == ackComplete && a.text != nil && (h.Result == nil || h.Result.Text != *a.text) {
			bad("the API shows result %v, acknowledged %q", h.Result, *a.text)
		}
		if a.kind == ackAnswer || a.kind == ackRequestInput {
			seen := map[string]string{}
			for _, in := range h.Inputs {
				seen[in.Key] = in.Status
			}
			for _, k := range a.keys {
				st, ok := seen[k]
				if !ok {
					bad("the API does not show input %q", k)
				} else if a.kind == ackAnswer && st == "open" {
					bad("the API shows input %q still open after an acknowledged answer", k)
				}
			}
		}
		if a.kind == ackCancel || a.kind == ackCreate {
			var task struct {
				TaskID string         `json:"taskId"`
				Status string         `json:"status"`
				Meta   map[string]any `json:"_meta"`
			}
			if err := get(a.token, "/workspace/task?task_id="+url.QueryEscape(a.task), &task); err != nil {
				bad("GET /workspace/task: %v", err)
			} else {
				if t := s.tasks[a.task]; t == nil || task.Status != t.status {
					bad("the API shows task %s as %s, the sidecar as %+v", a.task, task.Status, t)
				}
				if a.kind == ackCancel && !terminalTask(task.Status) {
					bad("the API shows task %s as %s after an acknowledged cancel", a.task, task.Status)
				}
				if task.Meta["commonroom/handoff_id"] != a.id {
					bad("task %s's _meta names handoff %v", a.task, task.Meta["commonroom/handoff_id"])
				}
			}
		}
	case ackJoin:
		var st struct {
			Version int64 `json:"version"`
		}
		if err := get(a.token, "/workspace/status", &st); err != nil {
			bad("the session no longer works: %v", err)
		} else if s.newest != nil && st.Version != s.newest.version {
			bad("the API says version %d, the sidecar %d", st.Version, s.newest.version)
		}
	case ackCommit, ackRawCommit:
		var ch struct {
			Changes []struct {
				Version       int64   `json:"version"`
				ParticipantID *string `json:"participant_id"`
			} `json:"changes"`
		}
		path := fmt.Sprintf("/workspace/changes_since?version=%d&limit=1", a.version-1)
		if err := get(a.token, path, &ch); err != nil {
			bad("GET %s: %v", path, err)
		} else if len(ch.Changes) != 1 || ch.Changes[0].Version != a.version || str(ch.Changes[0].ParticipantID) != a.who {
			bad("GET %s shows %+v", path, ch.Changes)
		}
	}
	return v
}
