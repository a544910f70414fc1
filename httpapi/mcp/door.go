// Package mcp is the MCP door of a room: the JSON-RPC adapter on /mcp
// (MCP 2026-07-28 over HTTP). It is a method table (methods, in mcp.go:
// method name → handler) plus its handlers: the tools (one per row of the
// operations table, httpapi/ops, and the board's app-only tool), tasks,
// resources, prompts, subscriptions/listen and the legacy
// resources/subscribe with its GET /mcp stream. Each handler reads as
// decode, run, encode: the wire both ways (the envelope and its validation
// order, the JSON scanning under it, params, the _meta cache, the encoded
// results) is internal/rpc, and what every door presents (the task form,
// the notification frames of published changes) is httpapi/present. It is
// a door of its own so that the protocol can be read and changed without
// reading the plain routes or the owner page.
//
// It decides nothing about who a bearer token is, how big a body may be or
// how many requests a session may make: the front door (package httpapi)
// owns authentication, body bounds, rate limits, the Host/Origin guard and
// the router, and hands them to this package as functions (Config), so this
// package never imports httpapi.
package mcp

import (
	"log/slog"
	"net/http"
	"slices"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/internal/reqnote"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Config is what the MCP door needs from the running room and the front
// door. The three functions are injected rather than imported so that a
// session is authenticated, a body bounded and a request counted exactly as
// on the plain routes, by the code that does it there.
type Config struct {
	// Room is the running room: writes go through its actor, reads through
	// its read pool, and its engine's Limits bound what this door accepts.
	Room *actor.Room
	// Hub is the fan-out hub for subscriptions/listen and GET /mcp; nil
	// means live updates are not available (those answer 503).
	Hub *listen.Hub
	// Logger receives internal failures and dropped streams (default:
	// discarded).
	Logger *slog.Logger
	// Version is the server version in every result's serverInfo.
	Version string
	// Principal authenticates the request's bearer session (required).
	// Only a session: the operator credential and the owner cookie are
	// never accepted on /mcp.
	Principal func(*http.Request) (room.Principal, error)
	// ReadBody reads the whole request body within the front door's bounds
	// (required); a body over the limit is a room.KindBodyTooLarge error.
	ReadBody func(http.ResponseWriter, *http.Request) ([]byte, error)
	// Allow spends one request of a session's per-minute budget (required):
	// ok, or how many seconds until it may ask again.
	Allow func(session string) (ok bool, retryAfter int)
	// BeforeSubscribe, when set, runs after a stream's request was
	// authenticated and before the stream registers with the hub (a
	// subscriptions/listen or GET /mcp). Tests end the session there: a
	// session that ends in that gap must not leave a stream behind.
	BeforeSubscribe func()
	// Note, when set, is told about each POST /mcp once it is answered
	// (see reqnote.Note): the front door's request log and metrics read the
	// method, tool, error kind and trace id from it.
	Note func(*http.Request, reqnote.Note)
}

// Handler serves /mcp. Its exported methods are the routes the front door
// mounts: POST /mcp (Post), GET /mcp (Get), and MethodNotAllowed for the
// other methods.
type Handler struct {
	room    *actor.Room
	eng     *room.Engine
	hub     *listen.Hub
	log     *slog.Logger
	limits  room.Limits
	version string
	tools   []Tool
	// appTools are the app-only tools (app.go): listed and callable only
	// for a request that declared MCP Apps.
	appTools []Tool
	// toolNames interns the tools' names (tools/call's name, as sent).
	toolNames map[string]string
	// info is serverInfoValue, made once.
	info map[string]string
	// metaJSON is serverInfo() encoded once: the _meta of a tool result.
	metaJSON []byte

	principal func(*http.Request) (room.Principal, error)
	readBody  func(http.ResponseWriter, *http.Request) ([]byte, error)
	allow     func(session string) (bool, int)
	// beforeSubscribe is Config.BeforeSubscribe (nil: nothing).
	beforeSubscribe func()
	// note is Config.Note (nil: nothing).
	note func(*http.Request, reqnote.Note)

	// metas answers repeated params._meta objects (the envelope).
	metas rpc.MetaCache
	// records keeps CachedRead answers (handoff_get) until the next commit.
	records actor.RecordCache
	// frames keeps the buffers of answered tool results (rpc.Frame).
	frames rpc.FramePool

	legacy        legacySubs
	legacyStreams legacyStreamSet
}

// New builds the MCP door from what the front door hands it. It registers
// with the hub so that a session's legacy subscriptions die with it.
func New(cfg Config) *Handler {
	if cfg.Principal == nil || cfg.ReadBody == nil || cfg.Allow == nil {
		panic("mcp: Config.Principal, ReadBody and Allow are required")
	}
	h := &Handler{room: cfg.Room, eng: cfg.Room.Engine(), hub: cfg.Hub, log: cfg.Logger,
		limits: cfg.Room.Engine().Limits, version: cfg.Version, tools: Tools(), appTools: appTools(),
		principal: cfg.Principal, readBody: cfg.ReadBody, allow: cfg.Allow, beforeSubscribe: cfg.BeforeSubscribe, note: cfg.Note}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.setServerInfo()
	h.toolNames = make(map[string]string, len(h.tools)+len(h.appTools))
	for _, t := range append(slices.Clip(h.tools), h.appTools...) {
		h.toolNames[t.Name] = t.Name
	}
	if h.hub != nil {
		// Subscriptions die with their session (leave, expiry, ended by the host).
		h.hub.OnSessionEnd(h.legacy.drop)
	}
	return h
}

// opEnv is what an operation runs against.
func (h *Handler) opEnv() ops.Env { return ops.Env{Room: h.room, Log: h.log, Records: &h.records} }

// Subscriptions reports what the legacy resources/subscribe registry holds
// for a session: its URIs, sorted, and whether it has an entry at all. The
// registry must forget a session that holds nothing or has ended, and this
// is how tests (and an operator's tooling) can see that it did.
func (h *Handler) Subscriptions(session string) (uris []string, held bool) {
	return h.legacy.held(session)
}
