package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/commonroom/ce/httpapi/present"
	"io"
	"mime"
	"slices"
	"strings"
	"time"
)

// The bridge speaks two eras of MCP to its host. A host that sends
// 2026-07-28 requests (params._meta names the protocol version) is forwarded
// byte for byte, as the room speaks it. A host that begins with initialize
// (2025-11-25 and the revisions before it, which most SDKs in use still
// negotiate) is answered by the bridge itself for what that era has and the
// room does not (initialize, ping, logging/setLevel, resources/subscribe),
// and every other request of it is forwarded as a 2026-07-28 request
// without the tasks extension, so the room treats it exactly as the brief's
// "client without the extension". The room itself never learns of
// initialize: its /mcp stays 2026-07-28 only.

// legacyVersions are the revisions before 2026-07-28 the bridge negotiates,
// newest first. A host that asks for another gets the newest, as the
// lifecycle's version negotiation says, and decides whether to go on.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC codes of the bridge's own answers to an old-era host.
const (
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
)

const (
	metaVersionKey = "io.modelcontextprotocol/protocolVersion"
	metaCapsKey    = "io.modelcontextprotocol/clientCapabilities"
	metaInfoKey    = "io.modelcontextprotocol/clientInfo"
	tasksExtension = present.TasksExtension
	serverInfoKey  = "io.modelcontextprotocol/serverInfo"
)

// modernOnlyMethods exist only from 2026-07-28 on (or only with the tasks
// extension, which an old-era host is never granted): such a host gets
// "method not found", as its era's server would answer a method it does
// not offer.
var modernOnlyMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true,
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true, "tasks/list": true, "tasks/result": true,
}

// logLevels are the levels logging/setLevel accepts (RFC 5424 names).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// legacyHost is what the bridge keeps of a host that began with initialize.
type legacyHost struct {
	version string
	// meta is the 2026-07-28 _meta every forwarded request of this host
	// carries: the version, the host's capabilities without the tasks
	// extension, and its client info.
	meta map[string]json.RawMessage
	// metaMembers is meta encoded once, as the members of an object.
	metaMembers []byte
}

// isModernRequest reports whether params carries the 2026-07-28 request
// _meta, which is how a request of that era says what it is. params is
// part of a message already checked to be valid JSON.
func isModernRequest(params json.RawMessage) bool {
	ms, _ := objectMembers(params)
	meta, ok := member(ms, params, "_meta")
	if !ok {
		return false
	}
	mm, _ := objectMembers(meta)
	_, ok = member(mm, meta, metaVersionKey)
	return ok
}

// initParams is the part of an initialize request the bridge reads.
type initParams struct {
	ProtocolVersion *string                    `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage            `json:"clientInfo"`
}

// negotiate picks the revision to answer initialize with.
func negotiate(requested string) string {
	if slices.Contains(legacyVersions, requested) {
		return requested
	}
	return legacyVersions[0]
}

// newLegacyHost checks an initialize request and builds what later
// requests of that host carry. The room must not see a capability the
// host cannot use in its era: the tasks extension (task handles, listen
// frames an old client cannot read) is withheld, and so are the era's own
// capabilities, which mean nothing on 2026-07-28; extensions other than
// tasks are passed on for the room to judge.
func newLegacyHost(params json.RawMessage) (*legacyHost, string, error) {
	var in initParams
	if err := json.Unmarshal(orEmpty(params), &in); err != nil {
		return nil, "", fmt.Errorf("initialize params: %v", err)
	}
	if in.ProtocolVersion == nil {
		return nil, "", fmt.Errorf("initialize needs params.protocolVersion")
	}
	info := bytes.TrimSpace(in.ClientInfo)
	var ci struct {
		Name    *string `json:"name"`
		Version *string `json:"version"`
	}
	if len(info) == 0 || info[0] != '{' || json.Unmarshal(info, &ci) != nil || ci.Name == nil || ci.Version == nil {
		return nil, "", fmt.Errorf("initialize needs params.clientInfo with a name and a version")
	}
	caps := map[string]json.RawMessage{}
	if raw, ok := in.Capabilities["extensions"]; ok {
		var ext map[string]json.RawMessage
		if json.Unmarshal(raw, &ext) == nil {
			delete(ext, tasksExtension)
			if len(ext) > 0 {
				caps["extensions"], _ = json.Marshal(ext)
			}
		}
	}
	capsJSON, _ := json.Marshal(caps)
	version := negotiate(*in.ProtocolVersion)
	h := &legacyHost{version: version, meta: map[string]json.RawMessage{
		metaVersionKey: json.RawMessage(`"` + mcpProtocolVersion + `"`),
		metaCapsKey:    capsJSON,
		metaInfoKey:    info,
	}}
	enc, _ := json.Marshal(h.meta)
	h.metaMembers = enc[1 : len(enc)-1]
	return h, version, nil
}

func orEmpty(params json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(params); len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return params
}

// rewrite is a request of this host as a 2026-07-28 request: the same id,
// method and params, with the era's _meta keys in place of whatever
// io.modelcontextprotocol/ keys the host put there (its own keys, such as
// progressToken or traceparent, stay). params is part of a message already
// checked to be valid JSON; nothing in it is decoded but _meta's keys.
func (h *legacyHost) rewrite(id json.RawMessage, method string, params json.RawMessage) (line []byte, newParams json.RawMessage, err error) {
	params = orEmpty(params)
	ms, ok := objectMembers(params)
	if !ok {
		return nil, nil, fmt.Errorf("params must be a JSON object")
	}
	meta := h.metaMembers
	if raw, ok := member(ms, params, "_meta"); ok {
		mm, ok := objectMembers(raw)
		if !ok {
			return nil, nil, fmt.Errorf("params._meta must be a JSON object")
		}
		own := appendObject(nil, nil, raw, mm, func(m jsonMember) bool {
			return !bytes.HasPrefix(m.key, []byte(`"io.modelcontextprotocol/`))
		})
		if len(own) > 2 { // not {}
			meta = append(append(append([]byte(nil), own[1:len(own)-1]...), ','), meta...)
		}
	}
	line = make([]byte, 0, len(params)+len(meta)+len(method)+len(id)+64)
	line = append(line, `{"jsonrpc":"2.0",`...)
	if id != nil {
		line = append(append(append(line, `"id":`...), id...), ',')
	}
	m, _ := json.Marshal(method)
	line = append(append(append(line, `"method":`...), m...), `,"params":`...)
	p := len(line)
	line = appendObject(line, append(append([]byte(`"_meta":{`), meta...), '}'), params, ms, func(m jsonMember) bool { return !m.is("_meta") })
	newParams = line[p:len(line):len(line)]
	return append(line, '}'), newParams, nil
}

// reshape is the room's answer as an old-era result: the 2026-07-28-only
// members (resultType, the caching hints, serverInfo in _meta) are taken
// out, and a structuredContent that is not an object (allowed from
// 2026-07-28 on, refused by the older schemas) is wrapped in one. A result
// that is not "complete" (a task handle, an input_required round) cannot be
// carried to this host and becomes an error. Errors pass unchanged. body
// is valid JSON (the bridge checked it); members keep their order.
func reshape(body []byte) []byte {
	top, _ := objectMembers(body)
	var res jsonMember
	found := false
	for _, m := range top {
		if m.is("result") {
			res, found = m, true
		}
	}
	if !found {
		return body
	}
	obj := body[res.start:res.end]
	ms, ok := objectMembers(obj)
	if !ok {
		return body
	}
	if rt, ok := member(ms, obj, "resultType"); ok && string(rt) != `"complete"` {
		kind, _ := stringValue(rt)
		e, _ := json.Marshal(map[string]any{"code": rpcInternalError,
			"message": fmt.Sprintf("the room answered with a %q result, which this protocol version cannot carry", kind)})
		out := appendObject(nil, nil, body, top, func(m jsonMember) bool { return !m.is("result") })
		out = out[:len(out)-1]
		if len(out) > 1 {
			out = append(out, ',')
		}
		return append(append(append(out, `"error":`...), e...), '}')
	}
	out := make([]byte, 0, len(body))
	out = append(out, body[:res.start]...)
	out = append(out, '{')
	first := true
	add := func(key []byte, value []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, key...), ':'), value...)
	}
	for _, m := range ms {
		v := obj[m.start:m.end]
		switch {
		case m.is("resultType"), m.is("ttlMs"), m.is("cacheScope"):
		case m.is("_meta"):
			mm, ok := objectMembers(v)
			if !ok {
				add(m.key, v)
				continue
			}
			kept := appendObject(nil, nil, v, mm, func(x jsonMember) bool { return !x.is(serverInfoKey) })
			if len(kept) > 2 {
				add(m.key, kept)
			}
		case m.is("structuredContent") && len(v) > 0 && v[0] != '{':
			add(m.key, append(append([]byte(`{"result":`), v...), '}'))
		default:
			add(m.key, v)
		}
	}
	out = append(out, '}')
	return append(out, body[res.end:]...)
}

// discovered is what the bridge tells an old-era host about the server, as
// the room's server/discover said it.
type discovered struct {
	serverInfo   json.RawMessage
	instructions string
}

// discover asks the room who it is (server/discover is public and cheap).
// A room that does not answer in time is no reason to fail initialize: the
// host gets the bridge's own name and this build's instructions, and its
// later requests get the room's "unreachable" answer as usual.
func (b *bridge) discover(ctx context.Context) discovered {
	fallback := discovered{serverInfo: mustJSON(map[string]string{"name": "ce", "version": version()}), instructions: present.Instructions}
	ctx, cancel := context.WithTimeout(ctx, min(b.reqTimeout, 5*time.Second))
	defer cancel()
	params := `{"_meta":{"` + metaVersionKey + `":"` + mcpProtocolVersion + `","` + metaCapsKey + `":{},"` +
		metaInfoKey + `":{"name":"ce-mcp","version":"` + version() + `"}}}`
	resp, err := b.post(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":`+params+`}`), "server/discover", json.RawMessage(params))
	if err != nil {
		b.log.Warn("initialize: the room did not say who it is", "err", err)
		return fallback
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Instructions string                     `json:"instructions"`
			Meta         map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" ||
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out) != nil {
		return fallback
	}
	d := discovered{serverInfo: out.Result.Meta[serverInfoKey], instructions: out.Result.Instructions}
	if len(d.serverInfo) == 0 {
		d.serverInfo = fallback.serverInfo
	}
	return d
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// initialize answers an old-era host's initialize: the negotiated version,
// what the bridge offers that era (tools, resources with subscribe,
// prompts; logging, because logging/setLevel is answered and clients that
// check capabilities first refuse to send it otherwise, though no log
// message is ever sent; no tasks, no listChanged: the catalogs never
// change), and who the server is.
func (b *bridge) initialize(ctx context.Context, id, params json.RawMessage) {
	if b.legacy.Load() != nil {
		b.writeError(id, rpcInvalidRequest, "Invalid Request: the connection is already initialized", nil)
		return
	}
	h, version, err := newLegacyHost(params)
	if err != nil {
		b.writeError(id, rpcInvalidParams, "Invalid params: "+err.Error(), map[string]any{"supported": legacyVersions})
		return
	}
	d := b.discover(ctx)
	res := map[string]any{
		"protocolVersion": version,
		"capabilities": map[string]any{
			"tools":     map[string]any{},
			"resources": map[string]any{"subscribe": true},
			"prompts":   map[string]any{},
			"logging":   map[string]any{},
		},
		"serverInfo": d.serverInfo,
	}
	if d.instructions != "" {
		res["instructions"] = d.instructions
	}
	b.legacy.Store(h)
	b.log.Info("the host speaks an earlier MCP revision: answering it in that era", "protocol_version", version)
	b.writeResult(id, res)
}

// handleLegacy routes a request of a host that began with initialize.
func (b *bridge) handleLegacy(ctx context.Context, h *legacyHost, method string, params, id json.RawMessage) {
	switch {
	case method == "initialize":
		b.initialize(ctx, id, params)
	case method == "ping":
		b.writeResult(id, map[string]any{})
	case method == "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(orEmpty(params), &p) != nil || !slices.Contains(logLevels, p.Level) {
			b.writeError(id, rpcInvalidParams, "Invalid params: level must be one of "+strings.Join(logLevels, ", "), nil)
			return
		}
		// The room sends no log messages; the level is accepted and has
		// nothing to change.
		b.writeResult(id, map[string]any{})
	case modernOnlyMethods[method]:
		b.writeError(id, rpcMethodNotFound, "Method not found: "+method+" is not offered in MCP "+h.version, nil)
	case method == "resources/subscribe" || method == "resources/unsubscribe":
		b.forwardLegacy(ctx, h, method, params, id, b.watch(h).after(method == "resources/subscribe", params))
	default:
		b.forwardLegacy(ctx, h, method, params, id, nil)
	}
}

// forwardLegacy forwards one old-era request as a 2026-07-28 one and
// reshapes the answer; then, when set, passes a successful answer through
// after (resources/subscribe waits there for the listen that carries it).
func (b *bridge) forwardLegacy(ctx context.Context, h *legacyHost, method string, params, id json.RawMessage, after afterFunc) {
	line, newParams, err := h.rewrite(id, method, params)
	if err != nil {
		b.writeError(id, rpcInvalidParams, "Invalid params: "+err.Error(), nil)
		return
	}
	b.request(ctx, line, method, newParams, id, &callShape{shape: reshape, after: after})
}

// writeResult writes a result of the bridge's own.
func (b *bridge) writeResult(id json.RawMessage, result any) {
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": idOrNull(id), "result": result})
	b.writeLine(out)
}

// notifyLegacy takes a notification of an old-era host. The room hears
// none of them (initialized and the like mean nothing on 2026-07-28); a
// cancellation stops the bridge's side of the request it names: nothing
// more is written for it and its round trip is abandoned.
func (b *bridge) notifyLegacy(method string, params json.RawMessage) {
	if method != "notifications/cancelled" {
		b.log.Debug("absorbed a notification of the host's era", "method", method)
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(orEmpty(params), &p) != nil || len(p.RequestID) == 0 {
		return
	}
	b.mu.Lock()
	target := b.inflight[idKey(p.RequestID)]
	b.mu.Unlock()
	if target != nil {
		target.cancelled.Store(true)
		target.cancel()
	}
	b.log.Debug("the host cancelled a request", "request_id", idKey(p.RequestID), "in_flight", target != nil)
}
