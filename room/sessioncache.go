package room

import "sync"

// sessionCache keeps the principals of live sessions in memory, keyed by the
// token's hash, so authenticating a request costs no query. The sidecar stays
// the authority: an entry is dropped once the commit that ends its session
// lands, and a session that ended can never be cached again (ended sessions
// never come back), which closes the race between a reader filling the cache
// from an older snapshot and the writer ending the session.
type sessionCache struct {
	mu     sync.RWMutex
	byHash map[string]cachedSession // token hash -> session
	byRef  map[string]string        // session ref -> token hash
	ended  map[string]struct{}      // refs known to have ended
}

type cachedSession struct {
	p       Principal
	expires int64 // unix ms
}

func (c *sessionCache) get(hash []byte) (cachedSession, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.byHash[string(hash)]
	return s, ok
}

func (c *sessionCache) put(hash []byte, s cachedSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, gone := c.ended[s.p.SessionRef]; gone {
		return
	}
	if c.byHash == nil {
		c.byHash, c.byRef = map[string]cachedSession{}, map[string]string{}
	}
	c.byHash[string(hash)] = s
	c.byRef[s.p.SessionRef] = string(hash)
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
