package room

import (
	"sync"
	"sync/atomic"
)

// sessionCache keeps the principals of live sessions in memory, keyed by the
// token's hash, so authenticating a request costs no query. The sidecar stays
// the authority: an entry is dropped once the commit that ends its session
// lands, and a session that ended can never be cached again (ended sessions
// never come back), which closes the race between a reader filling the cache
// from an older snapshot and the writer ending the session.
//
// A session's expiry slides with use (issue 16): each entry holds its expiry
// in an atomic, so a use moves it forward under the read lock and a busy
// room's requests never queue on a write lock.
type sessionCache struct {
	mu     sync.RWMutex
	byHash map[string]*cachedEntry // token hash -> session
	byRef  map[string]string       // session ref -> token hash
	ended  map[string]struct{}     // refs known to have ended
}

type cachedSession struct {
	p       Principal
	expires int64 // unix ms
	issued  int64 // unix ms: the maximum lifetime counts from here
	idle    int64 // ms added to a use; 0: the expiry does not slide
}

type cachedEntry struct {
	s       cachedSession // fixed once cached, but for expires
	expires atomic.Int64  // unix ms, only ever moved forward
}

func (c *sessionCache) get(hash []byte) (cachedSession, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byHash[string(hash)]
	if !ok {
		return cachedSession{}, false
	}
	s := e.s
	s.expires = e.expires.Load()
	return s, true
}

func (c *sessionCache) put(hash []byte, s cachedSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, gone := c.ended[s.p.SessionRef]; gone {
		return
	}
	if c.byHash == nil {
		c.byHash, c.byRef = map[string]*cachedEntry{}, map[string]string{}
	}
	if old, ok := c.byHash[string(hash)]; ok {
		// A fill from an older snapshot must not take back a slide.
		s.expires = max(s.expires, old.expires.Load())
	}
	e := &cachedEntry{s: s}
	e.expires.Store(s.expires)
	c.byHash[string(hash)] = e
	c.byRef[s.p.SessionRef] = string(hash)
}

// use records a use of the cached session at now: a live session's expiry
// slides to slideTo(…) when that is later. It returns the session as the
// use found it (expires before the slide), so the caller can refuse an
// expired one; ok is false when the session is not cached.
func (c *sessionCache) use(hash []byte, now, maxLife int64) (cachedSession, bool) {
	c.mu.RLock()
	e, ok := c.byHash[string(hash)]
	c.mu.RUnlock()
	if !ok {
		return cachedSession{}, false
	}
	s := e.s
	for {
		cur := e.expires.Load()
		s.expires = cur
		if cur <= now {
			return s, true // over: an expired session never slides back to life
		}
		next := slideTo(s.issued, s.idle, now, maxLife)
		if next <= cur || e.expires.CompareAndSwap(cur, next) {
			return s, true
		}
	}
}

// end forgets a session for good; the writer calls it after the commit that
// ended the session.
func (c *sessionCache) end(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		c.ended = map[string]struct{}{}
	}
	c.ended[ref] = struct{}{}
	if h, ok := c.byRef[ref]; ok {
		delete(c.byHash, h)
		delete(c.byRef, ref)
	}
}

// slideTo is the expiry a use at `use` gives a session issued at `issued`
// with an idle window of idle ms: min(use + idle, issued + maxLife). The
// sweeper, authentication and the last-seen flush all compute it here, so
// they agree on when a session ends. idle 0 (a session that does not slide)
// gives 0, which never extends anything.
func slideTo(issued, idle, use, maxLife int64) int64 {
	if idle <= 0 {
		return 0
	}
	return min(use+idle, issued+maxLife)
}
