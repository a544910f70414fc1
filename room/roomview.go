package room

import "context"

// roomEvents is how many recent events the room view carries.
const roomEvents = 20

// roomDecidedProposals is how many closed proposals the room view carries
// besides every open (pending or approved) one.
const roomDecidedProposals = 10

// RoomView is everything the owner page shows, read from one snapshot
// (GET /workspace/room).
type RoomView struct {
	Status       Status        `json:"status"`
	Participants []Participant `json:"participants"`
	Leases       []Lease       `json:"leases"`
	// Proposals holds every open proposal (pending, approved; bounded by the
	// list limit) and the most recently closed ones, newest first, without
	// their text (GET /workspace/proposal has it).
	Proposals   []ProposalInfo `json:"proposals"`
	Events      []Event        `json:"events"` // newest first
	Summary     Summary        `json:"summary"`
	Diagnostics Diagnostics    `json:"diagnostics"`
	// Handoffs holds the newest handoffs visible to the caller (D29), at
	// most the list limit: the inbox's first page (ListHandoffs).
	Handoffs []Handoff `json:"handoffs"`
	// Invites is present only for a caller holding invite.
	Invites *[]InviteInfo `json:"invites,omitempty"`
	// TaskShares is present only for an admin: who holds the active tasks.
	TaskShares *TaskShares `json:"task_shares,omitempty"`
	// Sidecar is present only for an admin: the room's size on disk,
	// which the owner page shows in its header (ce status and
	// /debug/metrics have the rest: free pages, what retention removed).
	Sidecar *SidecarSize `json:"sidecar,omitempty"`
	// Waiting is what waits on the caller (Engine.Waiting): the page's
	// header count and tab title, the same query as `ce inbox`.
	Waiting Waiting `json:"waiting"`
}

// Room assembles the room view for p.
func (e *Engine) Room(ctx context.Context, q Querier, p Principal, _ Empty) (RoomView, error) {
	if err := p.Require(CapRead); err != nil {
		return RoomView{}, err
	}
	var v RoomView
	var err error
	if v.Status, err = e.Status(ctx, q, p, Empty{}); err != nil {
		return RoomView{}, err
	}
	if v.Participants, err = e.participants(ctx, q, p); err != nil {
		return RoomView{}, err
	}
	if v.Leases, err = e.leases(ctx, q, p); err != nil {
		return RoomView{}, err
	}
	if v.Proposals, err = e.roomProposals(ctx, q); err != nil {
		return RoomView{}, err
	}
	h, err := e.History(ctx, q, p, HistoryInput{Limit: roomEvents})
	if err != nil {
		return RoomView{}, err
	}
	v.Events = h.Events
	if v.Summary, err = e.Summary(ctx, q, p, SummaryInput{}); err != nil {
		return RoomView{}, err
	}
	if v.Diagnostics, err = e.Diagnostics(ctx, q, p, Empty{}); err != nil {
		return RoomView{}, err
	}
	hs, err := e.ListHandoffs(ctx, q, p, ListHandoffsInput{Limit: e.Limits.MaxListItems})
	if err != nil {
		return RoomView{}, err
	}
	v.Handoffs = hs.Handoffs
	if p.Require(CapInvite) == nil {
		inv, err := e.ListInvites(ctx, q, p, Empty{})
		if err != nil {
			return RoomView{}, err
		}
		inv = nonNil(inv)
		v.Invites = &inv
	}
	if v.Waiting, err = e.Waiting(ctx, q, p, Empty{}); err != nil {
		return RoomView{}, err
	}
	if p.IsAdmin() {
		ts, err := e.ActiveTaskShares(ctx, q, p)
		if err != nil {
			return RoomView{}, err
		}
		v.TaskShares = &ts
		z, err := e.SidecarSize()
		if err != nil {
			return RoomView{}, err
		}
		v.Sidecar = &z
	}
	return v, nil
}

func (e *Engine) roomProposals(ctx context.Context, q Querier) ([]ProposalInfo, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+proposalInfoColumns+` FROM proposals
		WHERE status IN ('pending','approved') OR rowid IN (
			SELECT rowid FROM proposals WHERE status NOT IN ('pending','approved')
			ORDER BY created_at DESC, rowid DESC`+limitSQL(roomDecidedProposals)+`)
		ORDER BY created_at DESC, rowid DESC`+limitSQL(e.Limits.MaxListItems))
	if err != nil {
		return nil, Internal(err)
	}
	return e.collectProposalInfos(rows)
}
