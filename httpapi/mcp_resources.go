package httpapi

import (
	"sync"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

func (s *Server) mcpResourcesList(c *mcpCall) (any, *rpcError) {
	if e := s.noCursor(c); e != nil {
		return nil, e
	}
	if err := c.p.Require(room.CapRead); err != nil {
		return s.complete(cacheable(map[string]any{"resources": []any{}}, 0, "private")), nil
	}
	return s.complete(cacheable(map[string]any{"resources": []map[string]any{{
		"uri":         s.eng.DocumentURI(),
		"name":        s.eng.Name,
		"title":       s.eng.Name + " (the room's document)",
		"description": "The whole Markdown document at its current version.",
		"mimeType":    "text/markdown",
	}}}, 60_000, "private")), nil
}

func (s *Server) mcpTemplatesList(c *mcpCall) (any, *rpcError) {
	if e := s.noCursor(c); e != nil {
		return nil, e
	}
	return s.complete(cacheable(map[string]any{"resourceTemplates": []map[string]any{{
		"uriTemplate": s.eng.DocumentURI() + "/section/{path}",
		"name":        "section",
		"title":       "A section of the document",
		"description": "One heading's section, by its path (titles joined with /, percent-encoded), e.g. Plan%2FRisks.",
		"mimeType":    "text/markdown",
	}}}, 60_000, "private")), nil
}

func (s *Server) noCursor(c *mcpCall) *rpcError {
	var in struct {
		Cursor *string `json:"cursor"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return e
	}
	if in.Cursor != nil && *in.Cursor != "" {
		return invalidParams("invalid cursor", nil)
	}
	return nil
}

// mcpResourcesRead reads the document or one section, bounded like workspace_read.
func (s *Server) mcpResourcesRead(c *mcpCall) (any, *rpcError) {
	var in struct {
		URI string `json:"uri"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	section, ok := s.eng.SectionFromURI(in.URI)
	if !ok {
		return nil, invalidParams("resource not found", map[string]any{"uri": in.URI})
	}
	res, err := actor.Read(c.ctx, s.room, func(q room.Querier) (room.ReadResult, error) {
		return s.eng.Read(c.ctx, q, c.p, room.ReadInput{Section: section})
	})
	if err != nil {
		if room.ErrorKind(err) == room.KindInvalidRegion {
			return nil, invalidParams("resource not found", map[string]any{"uri": in.URI})
		}
		return nil, s.rpcErrorOf(err)
	}
	content := map[string]any{"uri": in.URI, "mimeType": "text/markdown", "text": res.Content,
		"_meta": map[string]any{"commonroom/version": res.Version, "commonroom/truncated": res.Truncated}}
	return s.complete(cacheable(map[string]any{"contents": []any{content}}, 0, "private")), nil
}

// legacySubs is the in-memory registry of resources/subscribe per session
// (D19): lost on restart, delivered only on GET /mcp.
type legacySubs struct {
	mu   sync.Mutex
	uris map[string]map[string]bool // session ref -> URIs
}

func (l *legacySubs) set(session, uri string, on bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.uris == nil {
		l.uris = map[string]map[string]bool{}
	}
	m := l.uris[session]
	if m == nil {
		m = map[string]bool{}
		l.uris[session] = m
	}
	if on {
		m[uri] = true
	} else {
		delete(m, uri)
	}
	return l.topicsLocked(session)
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
	return out
}

// mcpSubscribe keeps the legacy resources/subscribe and unsubscribe working
// for clients that already use them (the brief). The session must be able to
// read, and the URI must be this room's.
func (s *Server) mcpSubscribe(c *mcpCall, on bool) (any, *rpcError) {
	var in struct {
		URI string `json:"uri"`
	}
	if e := decodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if err := c.p.Require(room.CapRead); err != nil {
		return nil, s.rpcErrorOf(err)
	}
	if _, ok := s.eng.SectionFromURI(in.URI); !ok {
		return nil, invalidParams("resource not found", map[string]any{"uri": in.URI})
	}
	topics := s.legacy.set(c.p.SessionRef, in.URI, on)
	s.legacyStreams.update(c.p.SessionRef, topics)
	return s.complete(nil), nil
}
