package mcp

import (
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/skill"
	"github.com/commonroom/ce/room"
)

// legacySubs is the in-memory registry of resources/subscribe per session
// (D19): lost on restart, delivered only on GET /mcp. It holds only URIs of
// resources that existed when they were subscribed, at most
// MaxSubscriptionsPerSession per session, and forgets a session when the
// room ends it (the hub's OnSessionEnd), so it never outgrows the live
// sessions.
type legacySubs struct {
	mu   sync.Mutex
	uris map[string]map[string]struct{} // session ref -> canonical URIs
}

// add registers uri for session. It refuses (ok=false) a new URI once the
// session holds max; one it already holds is fine.
func (l *legacySubs) add(session, uri string, max int) (topics []string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.uris[session]
	if _, held := m[uri]; !held && len(m) >= max {
		return nil, false
	}
	if l.uris == nil {
		l.uris = map[string]map[string]struct{}{}
	}
	if m == nil {
		m = map[string]struct{}{}
		l.uris[session] = m
	}
	m[uri] = struct{}{}
	return l.topicsLocked(session), true
}

// remove unregisters uris; a URI that was not registered is no error, and a
// session left with none is forgotten.
func (l *legacySubs) remove(session string, uris ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.uris[session]
	for _, u := range uris {
		delete(m, u)
	}
	if m != nil && len(m) == 0 {
		delete(l.uris, session)
	}
	return l.topicsLocked(session)
}

// drop forgets everything session subscribed: it ended.
func (l *legacySubs) drop(session string) {
	l.mu.Lock()
	delete(l.uris, session)
	l.mu.Unlock()
}

func (l *legacySubs) topics(session string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topicsLocked(session)
}

func (l *legacySubs) topicsLocked(session string) []string {
	var out []string
	for u := range l.uris[session] {
		out = append(out, actor.ResourceTopic(u))
	}
	sort.Strings(out)
	return out
}

// held lists the URIs session holds, sorted, and whether it has an entry
// at all (Handler.Subscriptions).
func (l *legacySubs) held(session string) (uris []string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.uris[session]
	for u := range m {
		uris = append(uris, u)
	}
	sort.Strings(uris)
	return uris, ok
}

// resourceNotFound is the -32602 for a URI that names nothing here. It
// echoes the URI only when it is within the URI limit, so an oversized one
// costs the server nothing to answer.
func (s *Handler) resourceNotFound(uri string) *rpcError {
	if len(uri) > s.limits.MaxResourceURIChars {
		return invalidParams(fmt.Sprintf("resource not found: the URI is longer than %d bytes", s.limits.MaxResourceURIChars),
			map[string]any{"limit": s.limits.MaxResourceURIChars})
	}
	return invalidParams("resource not found", map[string]any{"uri": uri})
}

// mcpSubscribe keeps the legacy resources/subscribe and unsubscribe working
// for clients that already use them (the brief). The session must be able to
// read; subscribe needs a URI naming the document or a section that exists
// now, and respects the per-session cap; unsubscribing what is not
// subscribed is harmless.
func (s *Handler) mcpSubscribe(c *mcpCall, on bool) (any, *rpcError) {
	var in struct {
		URI string `json:"uri"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if err := c.p.Require(room.CapRead); err != nil {
		return nil, s.rpcErrorOf(err)
	}
	if s.hub == nil {
		return nil, &rpcError{Status: http.StatusServiceUnavailable, Code: codeInternalError, Message: "live updates are not available"}
	}
	if in.URI == skill.URI {
		return s.complete(nil), nil // the guide never changes: nothing to keep, nothing will come
	}
	canonical, ok, err := s.resourceURI(c, in.URI)
	if err != nil {
		return nil, s.rpcErrorOf(err)
	}
	ref := c.p.SessionRef
	if !on {
		uris := []string{in.URI}
		if ok {
			uris = append(uris, canonical)
		}
		s.legacyStreams.update(ref, s.legacy.remove(ref, uris...))
		return s.complete(nil), nil
	}
	if !ok {
		return nil, s.resourceNotFound(in.URI)
	}
	max := s.limits.MaxSubscriptionsPerSession
	topics, ok := s.legacy.add(ref, canonical, max)
	if !ok {
		return nil, s.rpcErrorOf(room.Errorf(room.KindLimitExceeded,
			"this session already follows %d resources, the most allowed; unsubscribe from one first", max).
			With("limit", max))
	}
	s.legacyStreams.update(ref, topics)
	// The session may have ended between its authentication and the add
	// above, after the hub told the registry to forget it: look again, now
	// that the entry is visible to the next session end.
	if _, err := s.principal(c.r); err != nil {
		s.legacy.drop(ref)
		return nil, s.rpcErrorOf(err)
	}
	return s.complete(nil), nil
}

// resourceURI resolves a client's URI against the current document.
func (s *Handler) resourceURI(c *mcpCall, uri string) (string, bool, error) {
	type resolved struct {
		uri string
		ok  bool
	}
	r, err := actor.Read(c.ctx, s.room, func(q room.Querier) (resolved, error) {
		u, ok, err := s.eng.ResourceURI(c.ctx, q, c.p, uri)
		return resolved{u, ok}, err
	})
	return r.uri, r.ok, err
}
