package httpapi

import (
	"net/http"
	"time"

	"github.com/commonroom/ce/room"
)

// Compaction through the running room (issue 26 item 3): ce compact sends
// POST /owner/compact with the operator token while the room serves. The
// room gives its free pages back through the writer, one short step at a
// time with commands taken between steps, for at most budget_ms; the
// answer says whether it finished, and ce compact asks again until it has.
// The budget keeps each request well inside the write timeout.

const (
	// defaultCompactBudget is one request's share of a compaction.
	defaultCompactBudget = 5 * time.Second
	// maxCompactBudget keeps a request inside DefaultWriteTimeout (30 s).
	maxCompactBudget = 20 * time.Second
)

// compactInput is POST /owner/compact's body; an empty body takes the
// default budget.
type compactInput struct {
	// BudgetMS is how long this request may give pages back, 1 to 20,000
	// milliseconds (default 5,000).
	BudgetMS int64 `json:"budget_ms"`
}

// CompactAnswer is what POST /owner/compact answers: the sidecar's size
// before and after this request's steps and what they did. ce compact
// decodes it.
type CompactAnswer struct {
	Before        room.Space `json:"before"`
	After         room.Space `json:"after"`
	Steps         int        `json:"steps"`
	PagesFreed    int64      `json:"pages_freed"`
	LongestStepMS float64    `json:"longest_step_ms"`
	Done          bool       `json:"done"`
	Checkpointed  bool       `json:"checkpointed"`
}

// compact is POST /owner/compact, for the local operator only.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	if !s.requireOperatorBearer(w, r, "compactions") {
		return
	}
	var in compactInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	budget := defaultCompactBudget
	if in.BudgetMS != 0 {
		if in.BudgetMS < 1 || in.BudgetMS > maxCompactBudget.Milliseconds() {
			s.sendError(w, r, room.Errorf(room.KindInvalidRequest, "budget_ms must be between 1 and %d", maxCompactBudget.Milliseconds()).
				With("field", "budget_ms"))
			return
		}
		budget = time.Duration(in.BudgetMS) * time.Millisecond
	}
	var out CompactAnswer
	var err error
	if out.Before, err = s.room.Space(r.Context()); err != nil {
		s.sendError(w, r, err)
		return
	}
	res, err := s.room.Compact(r.Context(), budget)
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	if out.After, err = s.room.Space(r.Context()); err != nil {
		s.sendError(w, r, err)
		return
	}
	out.Steps, out.PagesFreed, out.Done, out.Checkpointed = res.Steps, res.PagesFreed, res.Done, res.Checkpointed
	out.LongestStepMS = float64(res.Longest.Microseconds()) / 1000
	sendJSON(w, http.StatusOK, out)
}
