package httpapi

import (
	"context"
	"net/http"

	"github.com/commonroom/ce/room"
)

// The document's write side and the remaining reads of spec/domain.md §2.1.
// Each route decodes into the engine's own input type, so it and the
// matching MCP tool call the engine the same way.

func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) {
	base, err := queryInt64(r, "base_version")
	if err == nil && base == nil {
		err = room.Errorf(room.KindInvalidRequest, "base_version is required").With("field", "base_version")
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.DiffResult, error) {
		return s.eng.Diff(ctx, q, p, room.DiffInput{BaseVersion: *base})
	})
}

func (s *Server) getChangesSince(w http.ResponseWriter, r *http.Request) {
	v, err := queryInt64(r, "version")
	if err == nil && v == nil {
		err = room.Errorf(room.KindInvalidRequest, "version is required").With("field", "version")
	}
	var limit, maxItems int
	if err == nil {
		limit, _, err = queryInt(r, "limit")
	}
	if err == nil {
		maxItems, _, err = queryInt(r, "max_items")
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	if maxItems > 0 && (limit == 0 || maxItems < limit) {
		limit = maxItems
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Changes, error) {
		return s.eng.ChangesSince(ctx, q, p, room.ChangesInput{Version: *v, Limit: limit})
	})
}

func (s *Server) getLeases(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) ([]room.Lease, error) {
		res, err := s.eng.Leases(ctx, q, p, room.Empty{})
		return res.Leases, err
	})
}

// getProposals answers one page of the listing, without the proposed
// text: {proposals, next_cursor?} (see room.ProposalPage).
func (s *Server) getProposals(w http.ResponseWriter, r *http.Request) {
	in := room.ProposalsInput{Status: r.URL.Query().Get("status"), Cursor: r.URL.Query().Get("cursor")}
	var err error
	if in.Limit, _, err = queryInt(r, "limit"); err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.ProposalPage, error) {
		return s.eng.Proposals(ctx, q, p, in)
	})
}

// getProposal answers one proposal with its text.
func (s *Server) getProposal(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("proposal_id")
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Proposal, error) {
		return s.eng.GetProposal(ctx, q, p, room.ProposalInput{ProposalID: id})
	})
}

func (s *Server) getDiagnostics(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Diagnostics, error) {
		return s.eng.Diagnostics(ctx, q, p, room.Empty{})
	})
}

func (s *Server) getRoom(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.RoomView, error) {
		return s.eng.Room(ctx, q, p, room.Empty{})
	})
}

// postJSON serves a POST route whose body decodes into I and whose answer is
// what fn returns.
func postJSON[I, O any](s *Server, name string, fn func(tx *room.Tx, p room.Principal, in I) (O, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in I
		if err := s.decodeJSON(w, r, &in); err != nil {
			s.sendError(w, r, err)
			return
		}
		write(s, w, r, name, func(tx *room.Tx, p room.Principal) (O, error) { return fn(tx, p, in) })
	}
}
