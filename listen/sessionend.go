package listen

import "sync"

// sessionEndHooks are the functions OnSessionEnd registered. They run on
// the broadcaster after the streams of an ended session have ended, so
// whoever keeps per-session state beside the hub (a registry of resource
// subscriptions, say) can drop it without the hub knowing what it is.
type sessionEndHooks struct {
	mu sync.Mutex
	fs []func(session string)
}

// OnSessionEnd registers f to be called once for each session named by a
// published Batch.EndSessions (or EndSession), after that batch's messages
// were queued and the session's streams were ended. The room decides when a
// session ends (leave, expiry, the host ending it); the hub only passes the
// news on, so state kept per session elsewhere does not outlive it. f runs on
// the broadcaster goroutine: it must be quick and must not call back into
// the hub's Publish path and wait for it.
func (h *Hub) OnSessionEnd(f func(session string)) {
	if f == nil {
		return
	}
	h.endHooks.mu.Lock()
	h.endHooks.fs = append(h.endHooks.fs, f)
	h.endHooks.mu.Unlock()
}

// sessionsEnded tells every registered hook about sessions, outside h.mu.
func (h *Hub) sessionsEnded(sessions []string) {
	if len(sessions) == 0 {
		return
	}
	h.endHooks.mu.Lock()
	fs := h.endHooks.fs
	h.endHooks.mu.Unlock()
	for _, s := range sessions {
		if s == "" {
			continue
		}
		for _, f := range fs {
			f(s)
		}
	}
}
