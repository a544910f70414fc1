package httpapi

import (
	"context"
	"maps"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/room"
)

// metrics is GET /debug/metrics on the owner listener, for the local
// operator only: the writer's counters, the fan-out hub's (subscribers,
// deliveries, drops by cause) and the room's live counts, so a lagging
// subscriber or an overloaded writer is visible without reading logs; and
// the sidecar's size, what retention removed and the free pages given back
// (issue 26 item 5).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if !s.requireOperatorBearer(w, r, "metrics") {
		return
	}
	st := s.room.Stats()
	out := map[string]any{
		"uptime_seconds": int(time.Since(s.started).Seconds()),
		"writer": map[string]any{
			"commands": st.Commands.Load(), "failed": st.Failed.Load(), "batches": st.Batches.Load(),
			"overloaded": st.Overloaded.Load(), "sweeps": st.Sweeps.Load(), "queued": s.room.Queued(),
			"cpu_seconds": st.CPUSeconds(),
		},
	}
	if s.hub != nil {
		out["listen"] = s.hub.Stats()
	}
	out["connections"] = s.connStats()
	out["process"] = processStats()
	counts, err := actor.Read(r.Context(), s.room, func(q room.Querier) (map[string]int, error) {
		return s.eng.Counts(context.WithoutCancel(r.Context()), q)
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	totals, err := s.totals.get(r.Context(), s)
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	maps.Copy(counts, totals)
	// Proven joins' nonces the room holds now: bounded per invitation and
	// per room, so a flood of challenges shows here as a plateau.
	counts["join_challenges_outstanding"] = s.eng.OutstandingJoinChallenges()
	out["room"] = counts
	storage, err := actor.Read(r.Context(), s.room, func(q room.Querier) (room.Storage, error) {
		return s.eng.Storage(context.WithoutCancel(r.Context()), q)
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	out["storage"] = storage
	out["vacuum"] = map[string]any{
		"steps": st.VacuumSteps.Load(), "pages": st.VacuumPages.Load(), "failed": st.VacuumFailed.Load(),
		"longest_step_ms": float64(st.VacuumLongestNanos.Load()) / 1e6,
	}
	sendJSON(w, http.StatusOK, out)
}

// pprof is GET /debug/pprof/… on the owner listener, for the local operator
// only: a room that runs for years must be profiled where it runs, and the
// bench profiles a real ce serve under load the same way.
func (s *Server) pprof(w http.ResponseWriter, r *http.Request) {
	if !s.requireOperatorBearer(w, r, "profiles") {
		return
	}
	switch name := chi.URLParam(r, "*"); name {
	case "":
		pprof.Index(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		if rpprof.Lookup(name) == nil {
			s.sendError(w, r, room.Errorf(room.KindNotFound, "no profile named %q", wirejson.Clip(name, 64)))
			return
		}
		pprof.Handler(name).ServeHTTP(w, r)
	}
}

// totalsEvery is how stale the sidecar-wide totals of /debug/metrics may be.
// Counting a million handoffs takes a while, and a load test samples the
// endpoint every few milliseconds for the live numbers.
const totalsEvery = 5 * time.Second

// totalsCache keeps the last sidecar-wide totals for totalsEvery.
type totalsCache struct {
	mu    sync.Mutex
	at    time.Time
	value map[string]int
}

func (c *totalsCache) get(ctx context.Context, s *Server) (map[string]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.value != nil && time.Since(c.at) < totalsEvery {
		return c.value, nil
	}
	v, err := actor.Read(ctx, s.room, func(q room.Querier) (map[string]int, error) {
		return s.eng.Totals(context.WithoutCancel(ctx), q)
	})
	if err != nil {
		return nil, err
	}
	c.value, c.at = v, time.Now()
	return v, nil
}
