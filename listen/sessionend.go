package listen

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
	h.mu.Lock()
	h.endHooks = append(h.endHooks, f)
	h.mu.Unlock()
}

// sessionsEnded tells every registered hook about sessions, outside h.mu.
func (h *Hub) sessionsEnded(sessions []string) {
	if len(sessions) == 0 {
		return
	}
	h.mu.Lock()
	fs := h.endHooks
	h.mu.Unlock()
	for _, s := range sessions {
		if s == "" {
			continue
		}
		for _, f := range fs {
			f(s)
		}
	}
}
