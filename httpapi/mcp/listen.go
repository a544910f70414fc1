package mcp

import (
	"encoding/json"
	"errors"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/present"
	"net/http"
	"strings"
	"sync"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// idKey is the canonical text of a JSON-RPC id, so that the listen request
// and a later notifications/cancelled naming it match whatever spelling the
// client's encoder used.
func idKey(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type listenFilter struct {
	ToolsListChanged      *bool    `json:"toolsListChanged"`
	PromptsListChanged    *bool    `json:"promptsListChanged"`
	ResourcesListChanged  *bool    `json:"resourcesListChanged"`
	ResourceSubscriptions []string `json:"resourceSubscriptions"`
	TaskIDs               []string `json:"taskIds"`
}

// subscriptionsListen answers subscriptions/listen with an SSE stream.
// Everything is validated before the stream starts; the acknowledgement
// lists only what will be sent: resource URIs of this room for a session
// that can read, and the task ids tasks/get would answer for this session.
// Catalogs never change, so list-changed flags are never acknowledged.
func (h *Handler) subscriptionsListen(c *call) (any, *rpc.Error) {
	f, e := decodeListen(c)
	if e != nil {
		return nil, e
	}
	if h.hub == nil {
		return nil, &rpc.Error{Status: http.StatusServiceUnavailable, Code: rpc.CodeInternalError, Message: "live updates are not available"}
	}
	ack, topics, e := h.listenTopics(c, f)
	if e != nil {
		return nil, e
	}
	if h.beforeSubscribe != nil {
		h.beforeSubscribe()
	}
	sub, err := h.hub.Subscribe(listen.SubscribeRequest{Session: c.p.SessionRef, Key: idKey(c.req.ID), Topics: topics})
	if err != nil {
		return nil, listenError(err)
	}
	// A session that ended after it was authenticated and before the stream
	// registered told the hub before the stream was there to be ended.
	// Registered now, any later end reaches it; so look once more.
	if _, err := h.principal(c.r); err != nil {
		sub.Close()
		c.w.Header().Set("WWW-Authenticate", `Bearer realm="commonroom"`)
		return nil, h.rpcErrorOf(err)
	}
	h.serveListen(c, sub, ack)
	return nil, nil
}

// decodeListen reads subscriptions/listen's params: the notifications
// asked for are required, and task ids need the Tasks extension.
func decodeListen(c *call) (*listenFilter, *rpc.Error) {
	var in struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
		return nil, e
	}
	if in.Notifications == nil {
		return nil, rpc.InvalidParams("params.notifications is required", nil)
	}
	if len(in.Notifications.TaskIDs) > 0 && !c.req.Meta.Tasks {
		return nil, rpc.MissingCapability(tasksCapability)
	}
	return in.Notifications, nil
}

// listenTopics is what a listen request will be sent: the acknowledgement
// (the resource URIs and task ids kept) and the hub topics behind it.
func (h *Handler) listenTopics(c *call, f *listenFilter) (ack map[string]any, topics []string, e *rpc.Error) {
	ack = map[string]any{}
	if len(f.ResourceSubscriptions) > 0 && c.p.Require(room.CapRead) == nil {
		uris := []string{}
		for _, u := range uniqStrings(f.ResourceSubscriptions) {
			if _, ok := h.eng.SectionFromURI(u); ok {
				uris = append(uris, u)
				topics = append(topics, actor.ResourceTopic(u))
			}
		}
		if len(uris) > 0 {
			ack["resourceSubscriptions"] = uris
		}
	}
	if len(f.TaskIDs) > 0 {
		// Exactly the tasks for which tasks/get would succeed, asked the
		// way tasks/get asks.
		var ids []string
		for _, id := range uniqStrings(f.TaskIDs) {
			if _, err := h.room.Task(c.ctx, c.p, id); err == nil {
				ids = append(ids, id)
			} else if room.ErrorKind(err) != room.KindTaskNotFound {
				return nil, nil, h.rpcErrorOf(err)
			}
		}
		if len(ids) > 0 {
			ack["taskIds"] = ids
			for _, id := range ids {
				topics = append(topics, actor.TaskTopic(id))
			}
		}
	}
	return ack, topics, nil
}

// serveListen starts the stream: the acknowledgement first, the room's
// changes on sub's topics, and the request's result when it ends.
func (h *Handler) serveListen(c *call, sub *listen.Subscription, ack map[string]any) {
	ackParams, _ := json.Marshal(map[string]any{"notifications": ack})
	final, _ := rpc.MarshalJSON(map[string]any{"jsonrpc": "2.0", "id": c.req.ID, "result": map[string]any{
		"resultType": "complete",
		"_meta":      map[string]any{present.SubscriptionIDKey: c.req.ID, "io.modelcontextprotocol/serverInfo": h.serverInfo()["io.modelcontextprotocol/serverInfo"]},
	}})
	// Detached: once the acknowledgement is out, the stream no longer holds
	// this goroutine, the request or net/http's connection buffers; only
	// what the callback names is kept.
	log, ref := h.log, c.p.SessionRef
	sub.ServeDetached(c.w, c.r, listen.ServeOptions{
		Tag:   present.SubscriptionTag(c.req.ID),
		First: present.EncodeFrame(present.MethodListenAck, ackParams, c.req.ID),
		Final: present.EncodeData(json.RawMessage(strings.TrimSpace(string(final)))),
	}, func(why listen.EndReason) {
		if !why.Graceful() && why != listen.EndClientGone {
			log.Warn("listen stream dropped", "session_ref", ref, "reason", why.String())
		}
	})
}

func listenError(err error) *rpc.Error {
	switch {
	case errors.Is(err, listen.ErrTooManyStreams):
		return &rpc.Error{Status: http.StatusTooManyRequests, Code: rpc.CodeInternalError,
			Message: "this session already holds the maximum number of listen streams",
			Data:    map[string]any{"error": "limit_exceeded"}}
	default:
		return &rpc.Error{Status: http.StatusServiceUnavailable, Code: rpc.CodeInternalError, Message: "the room is stopping",
			Data: map[string]any{"error": "unavailable"}}
	}
}

func uniqStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// legacyStreamSet tracks the open GET /mcp streams per session, so a later
// resources/subscribe reaches a stream that is already open.
type legacyStreamSet struct {
	mu   sync.Mutex
	subs map[string]map[*listen.Subscription]bool
}

func (l *legacyStreamSet) add(session string, s *listen.Subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs == nil {
		l.subs = map[string]map[*listen.Subscription]bool{}
	}
	if l.subs[session] == nil {
		l.subs[session] = map[*listen.Subscription]bool{}
	}
	l.subs[session][s] = true
}

func (l *legacyStreamSet) remove(session string, s *listen.Subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs[session], s)
	if len(l.subs[session]) == 0 {
		delete(l.subs, session)
	}
}

func (l *legacyStreamSet) update(session string, topics []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs[session] {
		s.SetTopics(topics)
	}
}

// Get is the legacy GET /mcp stream: notifications/resources/updated for
// the URIs this session registered with resources/subscribe, never task
// notifications (the brief keeps it for clients that already use it).
func (h *Handler) Get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		w.Header().Set("Allow", "POST")
		rpc.WriteError(w, nil, &rpc.Error{Status: http.StatusMethodNotAllowed, Code: rpc.CodeInvalidRequest,
			Message: "GET /mcp is the legacy event stream: send Accept: text/event-stream, or POST JSON-RPC"})
		return
	}
	p, err := h.principal(r)
	if err != nil {
		h.authError(w, nil, err)
		return
	}
	if h.rateLimited(w, nil, p) {
		return
	}
	if err := p.Require(room.CapRead); err != nil {
		rpc.WriteError(w, nil, h.rpcErrorOf(err))
		return
	}
	if h.hub == nil {
		rpc.WriteError(w, nil, listenError(listen.ErrClosed))
		return
	}
	if h.beforeSubscribe != nil {
		h.beforeSubscribe()
	}
	sub, err := h.hub.Subscribe(listen.SubscribeRequest{Session: p.SessionRef, Topics: h.legacy.topics(p.SessionRef)})
	if err != nil {
		rpc.WriteError(w, nil, listenError(err))
		return
	}
	// As for subscriptions/listen: a session that ended meanwhile leaves no
	// stream behind.
	if _, err := h.principal(r); err != nil {
		sub.Close()
		h.authError(w, nil, err)
		return
	}
	h.legacyStreams.add(p.SessionRef, sub)
	// A subscribe racing the registration above is caught here.
	sub.SetTopics(h.legacy.topics(p.SessionRef))
	streams, ref := &h.legacyStreams, p.SessionRef
	sub.ServeDetached(w, r, listen.ServeOptions{}, func(listen.EndReason) { streams.remove(ref, sub) })
}

func (h *Handler) MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST, GET")
	rpc.WriteError(w, nil, &rpc.Error{Status: http.StatusMethodNotAllowed, Code: rpc.CodeInvalidRequest, Message: "method not allowed"})
}
