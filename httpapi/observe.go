package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// observe is GET /workspace/observe: the room's events as server-sent events.
// With since_event_id it first sends every event after that id still in the
// ring, then every event as it commits. Frames are
// {"jsonrpc":"2.0","method":"notifications/commonroom/event","params":<event>}.
// The live part starts before the backlog is read, so an event committed in
// between can appear twice: clients keep the highest event_id they have
// seen and skip anything at or below it. Like listen, it is a hint, not a
// cursor: after a drop, read /workspace/history?since_event_id=….
func (s *Server) observe(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if err := p.Require(room.CapObserve); err != nil {
		s.sendError(w, r, err)
		return
	}
	since, err := queryInt64(r, "since_event_id")
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	if s.hub == nil {
		s.sendError(w, r, room.Errorf(room.KindUnavailable, "live updates are not available"))
		return
	}
	sub, err := s.hub.Subscribe(listen.SubscribeRequest{Session: p.SessionRef, Topics: []string{actor.EventsTopic}})
	if err != nil {
		s.sendError(w, r, hubError(err))
		return
	}
	// The backlog is everything after since_event_id still in the ring,
	// read page by page (the ring is bounded, so this is too).
	var first []byte
	for since != nil {
		h, err := actor.Read(r.Context(), s.room, func(q room.Querier) (room.History, error) {
			return s.eng.History(r.Context(), q, p, room.HistoryInput{SinceEventID: since, Limit: s.limits.MaxListItems})
		})
		if err != nil {
			sub.Close()
			s.sendError(w, r, err)
			return
		}
		for _, ev := range h.Events {
			// The backlog is encoded as the hub encodes the live events.
			if f, _ := mcp.EncodeChange(listen.Message{Change: ev}); f != nil {
				first = f.AppendTo(first, nil)
			}
		}
		if len(h.Events) < s.limits.MaxListItems {
			break
		}
		last := h.Events[len(h.Events)-1].ID
		since = &last
	}
	sub.Serve(w, r, listen.ServeOptions{First: first})
}

func hubError(err error) error {
	if err == listen.ErrTooManyStreams {
		return room.Errorf(room.KindLimitExceeded, "this session already holds the maximum number of live streams")
	}
	return room.Errorf(room.KindUnavailable, "the room is stopping")
}
