package mcp

import (
	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/httpapi/skill"
	"github.com/commonroom/ce/room"
)

// skillResource is the agent guide as resources/list lists it. The guide
// is static, so a listen that names it acknowledges nothing for it and a
// legacy subscription to it is acknowledged without being kept: no update
// ever comes.
var skillResource = map[string]any{
	"uri":         skill.URI,
	"name":        "commonroom-skill",
	"title":       "Commonroom agent guide (SKILL.md)",
	"description": "How to work in this room with tools alone: read, lease, propose and commit the document; create, accept, answer, cancel and approve handoffs; which fields each tool requires. The same text as GET /skills/commonroom.",
	"mimeType":    "text/markdown",
}

func (h *Handler) resourcesList(c *call) (any, *rpc.Error) {
	if e := h.noCursor(c); e != nil {
		return nil, e
	}
	if err := c.p.Require(room.CapRead); err != nil {
		return h.complete(cacheable(map[string]any{"resources": []any{}}, 0, "private")), nil
	}
	list := []map[string]any{{
		"uri":         h.eng.DocumentURI(),
		"name":        h.eng.Name,
		"title":       h.eng.Name + " (the room's document)",
		"description": "The whole Markdown document at its current version.",
		"mimeType":    "text/markdown",
	}, skillResource}
	if c.req.Meta.UI {
		list = append(list, boardResource())
	}
	return h.complete(cacheable(map[string]any{"resources": list}, 60_000, "private")), nil
}

func (h *Handler) templatesList(c *call) (any, *rpc.Error) {
	if e := h.noCursor(c); e != nil {
		return nil, e
	}
	return h.complete(cacheable(map[string]any{"resourceTemplates": []map[string]any{{
		"uriTemplate": h.eng.DocumentURI() + "/section/{path}",
		"name":        "section",
		"title":       "A section of the document",
		"description": "One heading's section, by its path (titles joined with /, percent-encoded), e.g. Plan%2FRisks.",
		"mimeType":    "text/markdown",
	}}}, 60_000, "private")), nil
}

func (h *Handler) noCursor(c *call) *rpc.Error {
	var in struct {
		Cursor *string `json:"cursor"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return e
	}
	if in.Cursor != nil && *in.Cursor != "" {
		return rpc.InvalidParams("invalid cursor", nil)
	}
	return nil
}

// resourcesRead reads the document or one section, bounded like
// workspace_read, or the agent guide; each needs read.
func (h *Handler) resourcesRead(c *call) (any, *rpc.Error) {
	var in struct {
		URI string `json:"uri"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if in.URI == mcpapp.BoardURI && c.req.Meta.UI {
		return h.readFixed(c, map[string]any{"uri": mcpapp.BoardURI, "mimeType": mcpapp.MimeType, "text": mcpapp.HTML(), "_meta": mcpapp.ResourceMeta()})
	}
	if in.URI == skill.URI {
		return h.readFixed(c, map[string]any{"uri": skill.URI, "mimeType": "text/markdown", "text": skill.Text()})
	}
	section, ok := h.eng.SectionFromURI(in.URI)
	if !ok || len(in.URI) > h.limits.MaxResourceURIChars {
		return nil, h.resourceNotFound(in.URI)
	}
	res, err := actor.Read(c.ctx, h.room, func(q room.Querier) (room.ReadResult, error) {
		return h.eng.Read(c.ctx, q, c.p, room.ReadInput{Section: section})
	})
	if err != nil {
		if room.ErrorKind(err) == room.KindInvalidRegion {
			return nil, h.resourceNotFound(in.URI)
		}
		return nil, h.rpcErrorOf(err)
	}
	content := map[string]any{"uri": in.URI, "mimeType": "text/markdown", "text": res.Content,
		"_meta": map[string]any{"commonroom/version": res.Version, "commonroom/truncated": res.Truncated}}
	return h.complete(cacheable(map[string]any{"contents": []any{content}}, 0, "private")), nil
}

// readFixed is resources/read of a resource this door holds as it was
// built (the agent guide, the board's view): for a session that may read
// the room, cacheable for an hour.
func (h *Handler) readFixed(c *call, content map[string]any) (any, *rpc.Error) {
	if err := c.p.Require(room.CapRead); err != nil {
		return nil, h.rpcErrorOf(err)
	}
	return h.complete(cacheable(map[string]any{"contents": []any{content}}, 3_600_000, "private")), nil
}
