package httpapi

import (
	"context"
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// read runs a read method on a snapshot and writes its answer.
func read[T any](s *Server, w http.ResponseWriter, r *http.Request, fn func(ctx context.Context, q room.Querier, p room.Principal) (T, error)) {
	p := principalOf(r)
	out, err := actor.Read(r.Context(), s.room, func(q room.Querier) (T, error) { return fn(r.Context(), q, p) })
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	sendJSON(w, http.StatusOK, out)
}

// write runs a mutation through the actor and writes its answer.
func write[T any](s *Server, w http.ResponseWriter, r *http.Request, name string, fn func(tx *room.Tx, p room.Principal) (T, error)) {
	p := principalOf(r)
	out, err := actor.Do(r.Context(), s.room, name, func(tx *room.Tx) (T, error) { return fn(tx, p) })
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	sendJSON(w, http.StatusOK, out)
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Status, error) {
		return s.eng.Status(ctx, q, p, room.Empty{})
	})
}

func (s *Server) getRegions(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) ([]room.Region, error) {
		res, err := s.eng.Regions(ctx, q, p, room.Empty{})
		return res.Regions, err
	})
}

func (s *Server) getParticipants(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) ([]room.Participant, error) {
		res, err := s.eng.Participants(ctx, q, p, room.Empty{})
		return res.Participants, err
	})
}

func (s *Server) getInvites(w http.ResponseWriter, r *http.Request) {
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) ([]room.InviteInfo, error) {
		return s.eng.ListInvites(ctx, q, p, room.Empty{})
	})
}

func (s *Server) getSummary(w http.ResponseWriter, r *http.Request) {
	var in room.SummaryInput
	var err error
	if in.MaxLines, _, err = queryInt(r, "max_lines"); err == nil {
		if in.MaxBytes, _, err = queryInt(r, "max_bytes"); err == nil {
			in.MaxDepth, _, err = queryInt(r, "max_depth")
		}
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Summary, error) {
		return s.eng.Summary(ctx, q, p, in)
	})
}

func (s *Server) getRead(w http.ResponseWriter, r *http.Request) {
	in := room.ReadInput{Section: r.URL.Query().Get("section")}
	var err error
	if in.MaxLines, _, err = queryInt(r, "max_lines"); err == nil {
		if in.MaxBytes, _, err = queryInt(r, "max_bytes"); err == nil {
			in.Offset, _, err = queryInt(r, "offset")
		}
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.ReadResult, error) {
		return s.eng.Read(ctx, q, p, in)
	})
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	var in room.HistoryInput
	var err error
	if in.Limit, _, err = queryInt(r, "limit"); err == nil {
		in.SinceEventID, err = queryInt64(r, "since_event_id")
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.History, error) {
		return s.eng.History(ctx, q, p, in)
	})
}

func (s *Server) postInvite(w http.ResponseWriter, r *http.Request) {
	var in room.InviteInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "invite", func(tx *room.Tx, p room.Principal) (room.InviteGrant, error) {
		return s.eng.CreateInvite(tx, p, in)
	})
}

func (s *Server) postRevoke(w http.ResponseWriter, r *http.Request) {
	var in room.RevokeInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "invite.revoke", func(tx *room.Tx, p room.Principal) (room.RevokeResult, error) {
		return s.eng.RevokeInvite(tx, p, in)
	})
}
