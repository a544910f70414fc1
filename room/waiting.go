package room

import (
	"context"
	"database/sql"
	"sort"
)

// What waits on the host (issue 27, item 2): the one read query behind the
// owner page's header count and tab title and behind `ce inbox`, so the
// page and the terminal can never disagree about what is waiting.

// The kinds of a waiting item.
const (
	// WaitResult is a delivered handoff result (result_ready) to approve
	// or reject.
	WaitResult = "result"
	// WaitProposal is a pending proposal to review.
	WaitProposal = "proposal"
	// WaitQuestion is a handoff whose assignee asked questions that are
	// still open (its task is input_required).
	WaitQuestion = "question"
)

// waitingItemsPerKind bounds how many items of each kind the answer lists;
// the counts are always exact.
const waitingItemsPerKind = 50

// WaitingItem is one thing waiting on the caller, with names already
// resolved so a terminal or a notification can say it in words.
type WaitingItem struct {
	// Kind is result, proposal or question.
	Kind string `json:"kind"`
	// ID is what acts on it: the handoff id (result, question) or the
	// proposal id.
	ID      string `json:"id"`
	Summary string `json:"summary"`
	// FromID and FromName are who it waits from: the assignee that
	// delivered or asked, or the proposer.
	FromID   string `json:"from_id"`
	FromName string `json:"from_name"`
	// Target is the section it is about, when it names one.
	Target string `json:"target,omitempty"`
	// Since is when it started waiting (result delivered, proposal made,
	// first open question asked).
	Since string `json:"since"`
	// Questions is how many questions are open (question items only).
	Questions int `json:"questions,omitempty"`
	// Scope and BaseVersion describe a proposal; Stale says the document
	// moved on since its base (a commit will refuse it).
	Scope       string `json:"scope,omitempty"`
	BaseVersion int64  `json:"base_version,omitempty"`
	Stale       bool   `json:"stale,omitempty"`

	sinceMS int64
}

// Waiting is what waits on the caller: exact counts per kind and the items,
// oldest first (what has waited longest leads), at most 50 of each kind.
type Waiting struct {
	Count     int           `json:"count"`
	Results   int           `json:"results"`
	Proposals int           `json:"proposals"`
	Questions int           `json:"questions"`
	Items     []WaitingItem `json:"items"`
	// Truncated is set when a kind had more items than are listed.
	Truncated bool `json:"truncated,omitempty"`
}

// Waiting answers what waits on p. Results and proposals wait on whoever
// may approve (results: the handoffs p owns, every one for the host or an
// admin; never one p delivered itself, since nobody approves their own
// result); questions wait on the handoff's owner (or the host or an admin),
// as handoff_answer allows. A caller without approve has no results or
// proposals waiting. It reads only: nothing is marked seen.
func (e *Engine) Waiting(ctx context.Context, q Querier, p Principal, _ Empty) (Waiting, error) {
	if err := p.Require(CapRead); err != nil {
		return Waiting{}, err
	}
	w := Waiting{Items: []WaitingItem{}}
	admin, approver := p.IsAdmin(), p.Require(CapApprove) == nil
	if approver {
		n, items, err := e.waitingResults(ctx, q, p, admin)
		if err != nil {
			return Waiting{}, err
		}
		w.Results, w.Items = n, append(w.Items, items...)
		if n, items, err = e.waitingProposals(ctx, q); err != nil {
			return Waiting{}, err
		}
		w.Proposals, w.Items = n, append(w.Items, items...)
	}
	n, items, err := e.waitingQuestions(ctx, q, p, admin)
	if err != nil {
		return Waiting{}, err
	}
	w.Questions, w.Items = n, append(w.Items, items...)
	w.Count = w.Results + w.Proposals + w.Questions
	w.Truncated = len(w.Items) < w.Count
	sort.SliceStable(w.Items, func(i, j int) bool { return w.Items[i].sinceMS < w.Items[j].sinceMS })
	return w, nil
}

// ownerScope narrows a handoff query (alias h) to p's own handoffs unless p
// may act on every one.
func ownerScope(p Principal, admin bool) (string, []any) {
	if admin {
		return ``, nil
	}
	return ` AND h.owner_id = ?`, []any{p.ParticipantID}
}

func (e *Engine) waitingResults(ctx context.Context, q Querier, p Principal, admin bool) (int, []WaitingItem, error) {
	scope, args := ownerScope(p, admin)
	where := `h.status = 'result_ready' AND h.assignee_id IS NOT ?` + scope
	args = append([]any{p.ParticipantID}, args...)
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM handoffs h WHERE `+where, args...).Scan(&n); err != nil {
		return 0, nil, Internal(err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT h.handoff_id, h.summary, h.assignee_id, coalesce(pt.name, ''), h.target, h.result_at
		FROM handoffs h LEFT JOIN participants pt ON pt.participant_id = h.assignee_id
		WHERE `+where+` ORDER BY h.result_at, h.rowid`+limitSQL(waitingItemsPerKind), args...)
	if err != nil {
		return 0, nil, Internal(err)
	}
	items, err := scanWaiting(rows, WaitResult, func(it *WaitingItem, target *sql.NullString, since *sql.NullInt64) []any {
		return []any{&it.ID, &it.Summary, &it.FromID, &it.FromName, target, since}
	})
	return n, items, err
}

func (e *Engine) waitingProposals(ctx context.Context, q Querier) (int, []WaitingItem, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM proposals WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, nil, Internal(err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	var current int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM versions`).Scan(&current); err != nil {
		return 0, nil, Internal(err)
	}
	rows, err := q.QueryContext(ctx, `SELECT pr.proposal_id, pr.summary, pr.participant_id, coalesce(pt.name, ''), pr.target, pr.created_at,
		json_extract(pr.change_json, '$.section'), pr.base_version
		FROM proposals pr LEFT JOIN participants pt ON pt.participant_id = pr.participant_id
		WHERE pr.status = 'pending' ORDER BY pr.created_at, pr.rowid`+limitSQL(waitingItemsPerKind))
	if err != nil {
		return 0, nil, Internal(err)
	}
	var sections []*sql.NullString
	items, err := scanWaiting(rows, WaitProposal, func(it *WaitingItem, target *sql.NullString, since *sql.NullInt64) []any {
		s := new(sql.NullString)
		sections = append(sections, s)
		return []any{&it.ID, &it.Summary, &it.FromID, &it.FromName, target, since, s, &it.BaseVersion}
	})
	for i := range items {
		items[i].Scope = scopeOf(sections[i].String)
		items[i].Stale = items[i].BaseVersion != current
	}
	return n, items, err
}

func (e *Engine) waitingQuestions(ctx context.Context, q Querier, p Principal, admin bool) (int, []WaitingItem, error) {
	scope, args := ownerScope(p, admin)
	from := `FROM task_inputs ti JOIN tasks t ON t.task_id = ti.task_id AND t.status = 'input_required'
		JOIN handoffs h ON h.handoff_id = t.correlation_id AND h.status IN ('open','accepted')
		WHERE ti.closed_at IS NULL` + scope
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(DISTINCT h.handoff_id) `+from, args...).Scan(&n); err != nil {
		return 0, nil, Internal(err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT h.handoff_id, h.summary, coalesce(h.assignee_id, ''),
		coalesce((SELECT name FROM participants WHERE participant_id = h.assignee_id), ''), h.target, min(ti.requested_at), count(*)
		`+from+` GROUP BY h.handoff_id ORDER BY min(ti.requested_at), h.handoff_id`+limitSQL(waitingItemsPerKind), args...)
	if err != nil {
		return 0, nil, Internal(err)
	}
	items, err := scanWaiting(rows, WaitQuestion, func(it *WaitingItem, target *sql.NullString, since *sql.NullInt64) []any {
		return []any{&it.ID, &it.Summary, &it.FromID, &it.FromName, target, since, &it.Questions}
	})
	return n, items, err
}

// scanWaiting reads rows into items of one kind; dest names the columns of
// one row (the target and since columns are scanned into the values it is
// handed, then copied onto the item).
func scanWaiting(rows *sql.Rows, kind string, dest func(it *WaitingItem, target *sql.NullString, since *sql.NullInt64) []any) ([]WaitingItem, error) {
	defer rows.Close()
	var out []WaitingItem
	for rows.Next() {
		it := WaitingItem{Kind: kind}
		var target sql.NullString
		var since sql.NullInt64
		if err := rows.Scan(dest(&it, &target, &since)...); err != nil {
			return nil, Internal(err)
		}
		it.Target = target.String
		it.sinceMS = since.Int64
		it.Since = WireTime(since.Int64)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}
