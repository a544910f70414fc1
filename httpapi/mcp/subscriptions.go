package mcp

import (
	"fmt"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
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
func (h *Handler) resourceNotFound(uri string) *rpc.Error {
	if len(uri) > h.limits.MaxResourceURIChars {
		return rpc.InvalidParams(fmt.Sprintf("resource not found: the URI is longer than %d bytes", h.limits.MaxResourceURIChars),
			map[string]any{"limit": h.limits.MaxResourceURIChars})
	}
	return rpc.InvalidParams("resource not found", map[string]any{"uri": uri})
}

// legacySubscribe keeps the legacy resources/subscribe and unsubscribe working
// for clients that already use them (the brief). The session must be able to
// read; subscribe needs a URI naming the document or a section that exists
// now, and respects the per-session cap; unsubscribing what is not
// subscribed is harmless.
func (h *Handler) legacySubscribe(c *call, on bool) (any, *rpc.Error) {
	var in struct {
		URI string `json:"uri"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if err := c.p.Require(room.CapRead); err != nil {
		return nil, h.rpcErrorOf(err)
	}
	if h.hub == nil {
		return nil, &rpc.Error{Status: http.StatusServiceUnavailable, Code: rpc.CodeInternalError, Message: "live updates are not available"}
	}
	if in.URI == skill.URI {
		return h.complete(nil), nil // the guide never changes: nothing to keep, nothing will come
	}
	canonical, ok, err := h.resourceURI(c, in.URI)
	if err != nil {
		return nil, h.rpcErrorOf(err)
	}
	ref := c.p.SessionRef
	if !on {
		uris := []string{in.URI}
		if ok {
			uris = append(uris, canonical)
		}
		h.legacyStreams.update(ref, h.legacy.remove(ref, uris...))
		return h.complete(nil), nil
	}
	if !ok {
		return nil, h.resourceNotFound(in.URI)
	}
	max := h.limits.MaxSubscriptionsPerSession
	topics, ok := h.legacy.add(ref, canonical, max)
	if !ok {
		return nil, h.rpcErrorOf(room.Errorf(room.KindLimitExceeded,
			"this session already follows %d resources, the most allowed; unsubscribe from one first", max).
			With("limit", max))
	}
	h.legacyStreams.update(ref, topics)
	// The session may have ended between its authentication and the add
	// above, after the hub told the registry to forget it: look again, now
	// that the entry is visible to the next session end.
	if _, err := h.principal(c.r); err != nil {
		h.legacy.drop(ref)
		return nil, h.rpcErrorOf(err)
	}
	return h.complete(nil), nil
}

// resourceURI resolves a client's URI against the current document.
func (h *Handler) resourceURI(c *call, uri string) (string, bool, error) {
	type resolved struct {
		uri string
		ok  bool
	}
	r, err := actor.Read(c.ctx, h.room, func(q room.Querier) (resolved, error) {
		u, ok, err := h.eng.ResourceURI(c.ctx, q, c.p, uri)
		return resolved{u, ok}, err
	})
	return r.uri, r.ok, err
}
