package crashtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/commonroom/ce/room"

	_ "modernc.org/sqlite"
)

// maxActiveTasks is the brief's cap: at most 32 tasks working or
// input_required in one room.
const maxActiveTasks = 32

type handoffRow struct {
	id, owner, status, taskID string
	assignee, decidedBy       string
	resultText                *string
	createdAt                 int64
}

type taskRow struct {
	id, handoffID, status string
	assignee              string
}

type inputRow struct {
	closed      bool
	reason      string
	response    string
	requestedBy string
	respondedBy string
}

type proposalRow struct {
	id, participant, status string
	committedVersion        int64
	createdAt               int64
}

type versionRow struct {
	version                   int64
	sha                       string // content_sha256 as stored
	realSHA                   string // sha256 of content as stored
	content                   string
	source, participant, prop string
	createdAt                 int64
}

type eventRow struct {
	id        int64
	typ       string
	version   int64
	handoffID string
	taskID    string
	payload   map[string]any
	createdAt int64
}

// snapshot is the sidecar as one read transaction saw it.
type snapshot struct {
	integrity    []string // integrity_check or quick_check
	fkProblems   []string
	handoffs     map[string]*handoffRow
	tasks        map[string]*taskRow
	inputs       map[string]map[string]*inputRow // task -> key -> row
	proposals    map[string]*proposalRow
	versions     map[int64]*versionRow
	newest       *versionRow
	sessions     map[string]string // session_ref -> participant (live sessions only)
	participants map[string]bool
	invites      map[string]bool
	events       []*eventRow
	activeTasks  int
	hostID       string
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// openRO opens the sidecar read-only and query-only: nothing this test does
// can write to it.
func openRO(dbPath string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: dbPath}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", u.String()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// loadSnapshot reads everything the checks need inside one read transaction.
// full runs PRAGMA integrity_check; otherwise the cheaper quick_check (every
// page and record, without cross-checking indexes against tables).
func loadSnapshot(ctx context.Context, dbPath string, full bool) (*snapshot, error) {
	db, err := openRO(dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	s := &snapshot{
		handoffs: map[string]*handoffRow{}, tasks: map[string]*taskRow{}, inputs: map[string]map[string]*inputRow{},
		proposals: map[string]*proposalRow{}, versions: map[int64]*versionRow{}, sessions: map[string]string{},
		participants: map[string]bool{}, invites: map[string]bool{},
	}
	each := func(query string, scan func(rows *sql.Rows) error) error {
		rows, err := tx.QueryContext(ctx, query)
		if err != nil {
			return fmt.Errorf("%s: %w", query, err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return fmt.Errorf("%s: %w", query, err)
			}
		}
		return rows.Err()
	}
	steps := []func() error{
		func() error {
			check := `PRAGMA quick_check`
			if full {
				check = `PRAGMA integrity_check`
			}
			return each(check, func(r *sql.Rows) error {
				var v string
				err := r.Scan(&v)
				s.integrity = append(s.integrity, v)
				return err
			})
		},
		func() error {
			return each(`PRAGMA foreign_key_check`, func(r *sql.Rows) error {
				var table, parent string
				var rowid sql.NullInt64
				var fk int64
				if err := r.Scan(&table, &rowid, &parent, &fk); err != nil {
					return err
				}
				s.fkProblems = append(s.fkProblems, fmt.Sprintf("%s rowid %v -> %s (fk %d)", table, rowid.Int64, parent, fk))
				return nil
			})
		},
		func() error {
			return each(`SELECT handoff_id, owner_id, status, task_id, assignee_id, decided_by, result_json, created_at FROM handoffs`,
				func(r *sql.Rows) error {
					var h handoffRow
					var assignee, decided, result sql.NullString
					if err := r.Scan(&h.id, &h.owner, &h.status, &h.taskID, &assignee, &decided, &result, &h.createdAt); err != nil {
						return err
					}
					h.assignee, h.decidedBy = assignee.String, decided.String
					if result.Valid {
						var res struct {
							Text string `json:"text"`
						}
						if err := json.Unmarshal([]byte(result.String), &res); err != nil {
							return fmt.Errorf("handoff %s result_json: %w", h.id, err)
						}
						h.resultText = &res.Text
					}
					s.handoffs[h.id] = &h
					return nil
				})
		},
		func() error {
			return each(`SELECT task_id, correlation_id, status, assignee_id FROM tasks`, func(r *sql.Rows) error {
				var t taskRow
				var assignee sql.NullString
				if err := r.Scan(&t.id, &t.handoffID, &t.status, &assignee); err != nil {
					return err
				}
				t.assignee = assignee.String
				s.tasks[t.id] = &t
				if t.status == "working" || t.status == "input_required" {
					s.activeTasks++
				}
				return nil
			})
		},
		func() error {
			return each(`SELECT task_id, request_key, closed_at IS NOT NULL, coalesce(close_reason,''), coalesce(response_json,''),
				requested_by, coalesce(responded_by,'') FROM task_inputs`, func(r *sql.Rows) error {
				var task, key string
				var in inputRow
				if err := r.Scan(&task, &key, &in.closed, &in.reason, &in.response, &in.requestedBy, &in.respondedBy); err != nil {
					return err
				}
				if s.inputs[task] == nil {
					s.inputs[task] = map[string]*inputRow{}
				}
				s.inputs[task][key] = &in
				return nil
			})
		},
		func() error {
			return each(`SELECT proposal_id, participant_id, status, coalesce(committed_version,0), created_at FROM proposals`,
				func(r *sql.Rows) error {
					var p proposalRow
					if err := r.Scan(&p.id, &p.participant, &p.status, &p.committedVersion, &p.createdAt); err != nil {
						return err
					}
					s.proposals[p.id] = &p
					return nil
				})
		},
		func() error {
			var order []*versionRow
			err := each(`SELECT version, content_sha256, source, coalesce(participant_id,''), coalesce(proposal_id,''), created_at
				FROM versions ORDER BY version`, func(r *sql.Rows) error {
				var v versionRow
				if err := r.Scan(&v.version, &v.sha, &v.source, &v.participant, &v.prop, &v.createdAt); err != nil {
					return err
				}
				order = append(order, &v)
				s.versions[v.version] = &v
				s.newest = &v
				return nil
			})
			if err != nil {
				return err
			}
			// Each text rebuilt from its chunks: a version that cannot be
			// (or does not match its hash) shows as a hash mismatch.
			for _, v := range order {
				text, err := room.VersionText(ctx, tx, v.version)
				if err != nil {
					v.realSHA = "cannot rebuild: " + err.Error()
					continue
				}
				v.content, v.realSHA = text, sha(text)
			}
			return nil
		},
		func() error {
			return each(`SELECT session_ref, participant_id FROM sessions WHERE ended_at IS NULL`, func(r *sql.Rows) error {
				var ref, pid string
				if err := r.Scan(&ref, &pid); err != nil {
					return err
				}
				s.sessions[ref] = pid
				return nil
			})
		},
		func() error {
			return each(`SELECT participant_id, is_host FROM participants`, func(r *sql.Rows) error {
				var pid string
				var host bool
				if err := r.Scan(&pid, &host); err != nil {
					return err
				}
				s.participants[pid] = true
				if host {
					s.hostID = pid
				}
				return nil
			})
		},
		func() error {
			return each(`SELECT invite_id FROM invites`, func(r *sql.Rows) error {
				var id string
				if err := r.Scan(&id); err != nil {
					return err
				}
				s.invites[id] = true
				return nil
			})
		},
		func() error {
			return each(`SELECT event_id, event_type, coalesce(version,0), coalesce(handoff_id,''), coalesce(task_id,''), payload_json, created_at
				FROM events ORDER BY event_id`, func(r *sql.Rows) error {
				var e eventRow
				var payload string
				if err := r.Scan(&e.id, &e.typ, &e.version, &e.handoffID, &e.taskID, &payload, &e.createdAt); err != nil {
					return err
				}
				if err := json.Unmarshal([]byte(payload), &e.payload); err != nil {
					return fmt.Errorf("event %d payload: %w", e.id, err)
				}
				s.events = append(s.events, &e)
				return nil
			})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ---- state machines ----

var handoffNext = map[string][]string{
	"open":         {"accepted", "cancelled"},
	"accepted":     {"result_ready", "cancelled"},
	"result_ready": {"approved", "rejected"},
}

var proposalNext = map[string][]string{
	"pending":  {"approved", "rejected", "superseded"},
	"approved": {"committed", "conflicted"},
}

var taskNext = map[string][]string{
	"working":        {"input_required", "completed", "failed", "cancelled"},
	"input_required": {"working", "completed", "failed", "cancelled"},
}

// reachable reports whether a record acknowledged in status from may now be
// in status to: the same status, or one further along its state machine.
func reachable(next map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == to {
			return true
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		stack = append(stack, next[s]...)
	}
	return false
}

func terminalTask(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// invariants checks everything that must hold of any committed state,
// whatever was acknowledged: integrity, the active-task cap, records and
// their events, and handoffs agreeing with their tasks.
func (s *snapshot) invariants() []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	if len(s.integrity) != 1 || s.integrity[0] != "ok" {
		bad("PRAGMA integrity_check/quick_check: %s", strings.Join(s.integrity, "; "))
	}
	for _, p := range s.fkProblems {
		bad("PRAGMA foreign_key_check: %s", p)
	}
	if s.activeTasks > maxActiveTasks {
		bad("%d tasks are working or input_required; the cap is %d", s.activeTasks, maxActiveTasks)
	}
	if s.newest == nil {
		bad("no versions at all")
	}
	for _, ver := range s.versions {
		if ver.sha != ver.realSHA {
			bad("version %d: content_sha256 %s but the content hashes to %s", ver.version, ver.sha, ver.realSHA)
		}
		if ver.source == "proposal" {
			p, ok := s.proposals[ver.prop]
			if !ok || p.status != "committed" || p.committedVersion != ver.version {
				bad("version %d comes from proposal %s, which is not committed as that version (%+v)", ver.version, ver.prop, p)
			}
		}
	}
	for _, p := range s.proposals {
		if p.status == "committed" {
			ver, ok := s.versions[p.committedVersion]
			if !ok || ver.prop != p.id {
				bad("proposal %s is committed as version %d, which does not name it", p.id, p.committedVersion)
			}
		}
	}

	// Handoffs and their tasks change in one transaction: they must agree.
	for _, h := range s.handoffs {
		t, ok := s.tasks[h.taskID]
		if !ok {
			bad("handoff %s (%s): its task %s is gone (no TTL can have passed)", h.id, h.status, h.taskID)
			continue
		}
		if t.handoffID != h.id {
			bad("task %s names handoff %s, but handoff %s names it", t.id, t.handoffID, h.id)
		}
		want := map[string][]string{
			"open": {"working"}, "accepted": {"working", "input_required"},
			"result_ready": {"completed"}, "approved": {"completed"}, "rejected": {"completed"},
			"cancelled": {"cancelled", "failed"},
		}[h.status]
		okStatus := false
		for _, w := range want {
			okStatus = okStatus || t.status == w
		}
		if !okStatus {
			bad("handoff %s is %s but its task %s is %s", h.id, h.status, t.id, t.status)
		}
		if h.status != "open" && h.status != "cancelled" && t.assignee != h.assignee {
			bad("handoff %s has assignee %q, its task %q", h.id, h.assignee, t.assignee)
		}
		open := 0
		for _, in := range s.inputs[t.id] {
			if !in.closed {
				open++
			}
		}
		if (t.status == "input_required") != (open > 0) {
			bad("task %s is %s with %d outstanding input requests", t.id, t.status, open)
		}
	}
	for _, t := range s.tasks {
		if _, ok := s.handoffs[t.handoffID]; !ok {
			bad("task %s names handoff %s, which does not exist", t.id, t.handoffID)
		}
	}
	v = append(v, s.eventInvariants()...)
	return v
}

// eventInvariants: every state change still in the ring has its event, and
// no event exists without its change.
func (s *snapshot) eventInvariants() []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if len(s.events) == 0 {
		bad("the event ring is empty")
		return v
	}
	oldestAt := s.events[0].createdAt
	// Anything created strictly after the oldest event's commit time was
	// created after that event, so its creation event cannot have been
	// trimmed (records made in the same batch share one timestamp, hence
	// the strict comparison).
	created := map[string]bool{}
	taskCreated := map[string]bool{}
	propCreated := map[string]bool{}
	versionEvent := map[int64]bool{}
	lastHandoff := map[string]*eventRow{}
	lastTask := map[string]*eventRow{}
	lastProposal := map[string]*eventRow{}
	for _, e := range s.events {
		switch {
		case strings.HasPrefix(e.typ, "handoff.") || strings.HasPrefix(e.typ, "task."):
			h, ok := s.handoffs[e.handoffID]
			if !ok {
				bad("event %d %s names handoff %q, which does not exist", e.id, e.typ, e.handoffID)
				continue
			}
			if e.taskID != h.taskID {
				bad("event %d %s names task %q, but handoff %s's task is %s", e.id, e.typ, e.taskID, h.id, h.taskID)
			}
			if p, _ := e.payload["handoff_id"].(string); p != e.handoffID {
				bad("event %d %s: payload handoff_id %q, column %q", e.id, e.typ, p, e.handoffID)
			}
			if strings.HasPrefix(e.typ, "handoff.") {
				lastHandoff[e.handoffID] = e
				if e.typ == "handoff.created" {
					created[e.handoffID] = true
				}
			} else {
				lastTask[e.taskID] = e
				if e.typ == "task.created" {
					taskCreated[e.taskID] = true
				}
			}
		case e.typ == "change.committed":
			if _, ok := s.versions[e.version]; !ok {
				bad("event %d change.committed names version %d, which does not exist", e.id, e.version)
			}
			if pv, _ := e.payload["version"].(float64); int64(pv) != e.version {
				bad("event %d change.committed: payload version %v, column %d", e.id, e.payload["version"], e.version)
			}
			versionEvent[e.version] = true
		case strings.HasPrefix(e.typ, "proposal."):
			id, _ := e.payload["proposal_id"].(string)
			if _, ok := s.proposals[id]; !ok {
				bad("event %d %s names proposal %q, which does not exist", e.id, e.typ, id)
				continue
			}
			lastProposal[id] = e
			if e.typ == "proposal.created" {
				propCreated[id] = true
			}
		}
	}
	for id, e := range lastHandoff {
		if st, _ := e.payload["status"].(string); st != s.handoffs[id].status {
			bad("handoff %s is %s, but its latest event %d (%s) says %q", id, s.handoffs[id].status, e.id, e.typ, st)
		}
	}
	for id, e := range lastTask {
		t, ok := s.tasks[id]
		if !ok {
			continue // purged after its TTL: nothing to compare
		}
		if st, _ := e.payload["status"].(string); st != t.status {
			bad("task %s is %s, but its latest event %d (%s) says %q", id, t.status, e.id, e.typ, st)
		}
	}
	for id, e := range lastProposal {
		if st, _ := e.payload["status"].(string); st != s.proposals[id].status {
			bad("proposal %s is %s, but its latest event %d (%s) says %q", id, s.proposals[id].status, e.id, e.typ, st)
		}
	}
	for _, h := range s.handoffs {
		if h.createdAt > oldestAt {
			if !created[h.id] {
				bad("handoff %s was created after the oldest event in the ring but has no handoff.created", h.id)
			}
			if !taskCreated[h.taskID] {
				bad("task %s was created after the oldest event in the ring but has no task.created", h.taskID)
			}
		}
	}
	for _, p := range s.proposals {
		if p.createdAt > oldestAt && !propCreated[p.id] {
			bad("proposal %s was created after the oldest event in the ring but has no proposal.created", p.id)
		}
	}
	for _, ver := range s.versions {
		if ver.createdAt > oldestAt && !versionEvent[ver.version] {
			bad("version %d was created after the oldest event in the ring but has no change.committed", ver.version)
		}
	}
	sort.Strings(v)
	return v
}
