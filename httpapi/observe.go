package httpapi

import (
	"github.com/commonroom/ce/httpapi/present"
	"net/http"

	"github.com/commonroom/ce/actor"
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
//
// What a stream shows is what its caller may see (issue 25): an event about
// a handoff or its task only to whoever may see that handoff (handoff_get's
// rule), in the backlog (History) and live (eventFilter). And it lasts as
// long as the credential it was opened with: a session's stream ends when
// the room ends the session (left, ended by the host, expired; the hub's
// Batch.EndSessions, as for subscriptions/listen and GET /mcp); the owner
// cookie is no session of the room, so its stream ends at the cookie's own
// expiry (listen's Until). The operator token lasts as long as the room.
func (s *Server) observe(w http.ResponseWriter, r *http.Request, l listener) {
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
	req := listen.SubscribeRequest{Session: p.SessionRef, Topics: []string{actor.EventsTopic}, Filter: eventFilter(p)}
	if l == ownerListener && bearer(r) == "" {
		// Authenticated by the owner cookie (the only credential without a
		// bearer that authenticate lets through).
		req.Until, _ = s.pages.expiry(r)
	}
	if s.beforeSubscribe != nil {
		s.beforeSubscribe()
	}
	sub, err := s.hub.Subscribe(req)
	if err != nil {
		s.sendError(w, r, hubError(err))
		return
	}
	// A credential that ended after authenticate looked at it and before
	// the stream registered told the hub before the stream was there to be
	// ended. Registered now, any later end reaches it; so look once more.
	if _, err := s.principal(r, l); err != nil {
		sub.Close()
		s.sendError(w, r, err)
		return
	}
	// The backlog is everything after since_event_id still in the ring that
	// p may see, read page by page (the ring is bounded, so this is too).
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
			if f, _ := present.EncodeChange(listen.Message{Change: ev}); f != nil {
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

// eventFilter is an observe stream's rule for the hub (listen's Filter): an
// event about a handoff or its task reaches p only if p may see that
// handoff, as the command that wrote the event left it (room.Event.VisibleTo);
// every other event reaches everyone. A caller who sees every handoff needs
// no filter, so the host's and approvers' streams cost nothing more.
func eventFilter(p room.Principal) func(listen.Message) bool {
	if room.SeesEveryHandoff(p) {
		return nil
	}
	return func(m listen.Message) bool {
		ev, ok := m.Change.(room.Event)
		return ok && ev.VisibleTo(p)
	}
}

func hubError(err error) error {
	if err == listen.ErrTooManyStreams {
		return room.Errorf(room.KindLimitExceeded, "this session already holds the maximum number of live streams")
	}
	return room.Errorf(room.KindUnavailable, "the room is stopping")
}
