package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// metrics is GET /debug/metrics on the owner listener, for the local
// operator only: the writer's counters, the fan-out hub's (subscribers,
// deliveries, drops by cause) and the room's live counts, so a lagging
// subscriber or an overloaded writer is visible without reading logs.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).Trusted {
		s.sendError(w, r, room.Errorf(room.KindPermissionDenied, "metrics are for the local operator"))
		return
	}
	st := s.room.Stats()
	out := map[string]any{
		"uptime_seconds": int(time.Since(s.started).Seconds()),
		"writer": map[string]any{
			"commands": st.Commands.Load(), "failed": st.Failed.Load(), "batches": st.Batches.Load(),
			"overloaded": st.Overloaded.Load(), "sweeps": st.Sweeps.Load(), "queued": s.room.Queued(),
		},
	}
	if s.hub != nil {
		out["listen"] = s.hub.Stats()
	}
	counts, err := actor.Read(r.Context(), s.room, func(q room.Querier) (map[string]int, error) {
		return s.eng.Counts(context.WithoutCancel(r.Context()), q)
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	out["room"] = counts
	sendJSON(w, http.StatusOK, out)
}
