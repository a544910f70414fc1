package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/httpapi/present"
	"github.com/commonroom/ce/transport"
)

// The JSON-RPC codes the bridge itself answers with (JSON-RPC 2.0 §5.1);
// everything else on stdout is the room's own answer, byte for byte.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcInternalError  = -32603
)

// mcpProtocolVersion is the header the bridge sends when the host's
// request carries no version in params._meta: the room then answers the
// missing _meta itself (-32602) instead of a header mismatch the host never
// caused. It is the room's own version, named once in present.
const mcpProtocolVersion = present.ProtocolVersion

// Bounds of the bridge.
const (
	bridgeMaxLine     = 32 << 20 // one JSON-RPC message from the host
	bridgeMaxResponse = 64 << 20 // one JSON response from the room
	bridgeMaxInFlight = 64       // requests forwarded at once; stdin waits beyond
	bridgeDialTimeout = 10 * time.Second
	// bridgeNotifyTimeout bounds forwarding one notification, during which
	// the next line waits.
	bridgeNotifyTimeout = 5 * time.Second
)

// bridge is `ce mcp` once it has a session: it reads newline-delimited
// JSON-RPC from the host, forwards each message to the room's /mcp with the
// session's bearer and the headers the HTTP transport requires, and writes
// what comes back, one message a line.
type bridge struct {
	endpoint   string // …/mcp
	token      string
	hc         *http.Client
	reqTimeout time.Duration
	log        *slog.Logger

	outMu sync.Mutex
	out   io.Writer

	mu       sync.Mutex
	inflight map[string]*bridgeCall // by canonical request id

	wg  sync.WaitGroup
	sem chan struct{}

	// legacy is set once a host began with initialize (an MCP revision
	// before 2026-07-28): its requests are then answered in that era.
	legacy atomic.Pointer[legacyHost]
	// resources holds such a host's resources/subscribe set on one listen
	// stream; started on its first subscribe, stopped when run ends.
	resources *resourceWatch
}

// bridgeCall is one request the room is answering.
type bridgeCall struct {
	cancel context.CancelFunc
	// cancelled is set once the host cancelled it: nothing more is written
	// for it (stdio cancellation: the receiver sends no response).
	cancelled atomic.Bool
	listen    bool
	// shape, for a request of an old-era host, turns the room's answer
	// into that era's; nil passes it unchanged.
	shape *callShape
}

// callShape is what the bridge does to the room's answer for an old-era
// host: reshape the JSON, then (when set) after, which may replace it.
type callShape struct {
	shape func(body []byte) []byte
	after afterFunc
}

// afterFunc sees the answer about to be written for a request, and returns
// what to write instead (or the same bytes).
type afterFunc func(ctx context.Context, body []byte) []byte

func newBridge(baseURL, token string, reqTimeout time.Duration, out io.Writer, log *slog.Logger) *bridge {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: bridgeDialTimeout}).DialContext,
		MaxIdleConnsPerHost: bridgeMaxInFlight,
		IdleConnTimeout:     90 * time.Second,
	}
	return &bridge{endpoint: strings.TrimRight(baseURL, "/") + "/mcp", token: token, hc: &http.Client{Transport: tr},
		reqTimeout: reqTimeout, log: log, out: out, inflight: map[string]*bridgeCall{}, sem: make(chan struct{}, bridgeMaxInFlight)}
}

// rpcMessage is what the bridge reads of a host's message to route it.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// run serves the host until stdin ends or ctx is done, then ends every
// listen and waits (at most the request timeout and a little) for the
// requests still in flight.
func (b *bridge) run(ctx context.Context, in io.Reader) {
	lines := make(chan []byte)
	tooLong := make(chan struct{})
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, long, err := readLine(r, bridgeMaxLine)
			if long {
				select {
				case tooLong <- struct{}{}:
				case <-ctx.Done():
					return
				}
			} else if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					b.log.Warn("reading stdin", "err", err)
				}
				return
			}
		}
	}()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tooLong:
			b.writeError(nil, rpcInvalidRequest, fmt.Sprintf("the message is longer than %d bytes", bridgeMaxLine), nil)
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			b.handle(ctx, line)
		}
	}
	if b.resources != nil {
		b.resources.close()
	}
	b.mu.Lock()
	for _, c := range b.inflight {
		if c.listen {
			c.cancelled.Store(true)
			c.cancel()
		}
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(b.reqTimeout + 5*time.Second):
		b.log.Warn("requests still in flight at exit were abandoned")
	}
}

// readLine reads one line without its newline; a line longer than max is
// consumed and reported as too long.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// handle routes one line from the host.
func (b *bridge) handle(ctx context.Context, line []byte) {
	line = bytes.TrimSpace(line)
	var m rpcMessage
	if err := json.Unmarshal(line, &m); err != nil { // validates the whole line first
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &syntax):
			b.writeError(nil, rpcParseError, "Parse error: the line is not JSON", nil)
		case line[0] != '{':
			b.writeError(nil, rpcInvalidRequest, "Invalid Request: one JSON-RPC object a line (no batches)", nil)
		default:
			b.writeError(idOrNull(m.ID), rpcInvalidRequest, "Invalid Request: "+err.Error(), nil)
		}
		return
	}
	if m.Method == nil {
		if m.Result != nil || m.Error != nil {
			b.log.Debug("ignored a response from the host (the bridge sends no requests)")
			return
		}
		b.writeError(idOrNull(m.ID), rpcInvalidRequest, "Invalid Request: no method", nil)
		return
	}
	method := *m.Method
	legacy := b.legacy.Load()
	if m.ID == nil {
		if legacy != nil {
			b.notifyLegacy(method, m.Params)
			return
		}
		b.notify(ctx, line, method, m.Params)
		return
	}
	switch {
	case legacy != nil:
		b.handleLegacy(ctx, legacy, method, m.Params, m.ID)
	case method == "initialize":
		b.initialize(ctx, m.ID, m.Params)
	case isModernRequest(m.Params) || method == "server/discover":
		b.request(ctx, line, method, m.Params, m.ID, nil)
	case method == "ping":
		// A ping before initialize is the one request an old-era host may
		// send then; a 2026-07-28 ping carries _meta and is forwarded.
		b.writeResult(m.ID, map[string]any{})
	default:
		b.writeError(m.ID, rpcInvalidParams, "Invalid params: params._meta is missing. A host speaking MCP 2026-07-28 carries "+
			"io.modelcontextprotocol/protocolVersion in params._meta; one speaking an earlier revision sends initialize first",
			map[string]any{"supported": append([]string{mcpProtocolVersion}, legacyVersions...)})
	}
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// idKey is the canonical text of a JSON-RPC id, so a cancellation matches
// its request however the host spelled the id (1, 1.0).
func idKey(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return fmt.Sprint(f)
		}
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// request forwards a request and writes its answer (or frames) as they come.
func (b *bridge) request(ctx context.Context, line []byte, method string, params, id json.RawMessage, shape *callShape) {
	key := idKey(id)
	listen := method == "subscriptions/listen"
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &bridgeCall{cancel: cancel, listen: listen, shape: shape}
	b.mu.Lock()
	if _, dup := b.inflight[key]; dup {
		b.mu.Unlock()
		cancel()
		b.writeError(id, rpcInvalidRequest, "Invalid Request: a request with this id is still in flight", nil)
		return
	}
	b.inflight[key] = c
	b.mu.Unlock()
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		b.forget(key, c)
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.sem }()
		defer b.forget(key, c)
		b.forward(cctx, c, line, method, params, id)
	}()
}

func (b *bridge) forget(key string, c *bridgeCall) {
	c.cancel()
	b.mu.Lock()
	if b.inflight[key] == c {
		delete(b.inflight, key)
	}
	b.mu.Unlock()
}

// forward is one request's round trip. A request other than a listen has
// reqTimeout for all of it; a listen has it until the room's answer starts.
func (b *bridge) forward(ctx context.Context, c *bridgeCall, line []byte, method string, params, id json.RawMessage) {
	var stopTimer func() bool
	if c.listen {
		t := time.AfterFunc(b.reqTimeout, c.cancel)
		stopTimer = t.Stop
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.reqTimeout)
		defer cancel()
	}
	resp, err := b.post(ctx, line, method, params)
	if stopTimer != nil {
		stopTimer()
	}
	if err != nil {
		if !c.cancelled.Load() {
			b.unreachable(id, err)
		}
		return
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		b.stream(c, resp, id)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, bridgeMaxResponse+1))
	if c.cancelled.Load() {
		return
	}
	if err != nil {
		b.unreachable(id, err)
		return
	}
	if len(body) > bridgeMaxResponse {
		b.writeError(id, rpcInternalError, "the room's answer is larger than the bridge passes on", map[string]any{"error": "body_too_large", "http_status": resp.StatusCode})
		return
	}
	if msg, ok := rpcResponse(body); ok {
		b.writeAnswer(ctx, c, msg)
		return
	}
	// Not a JSON-RPC answer (a proxy, the rate limiter): say what it was.
	data := map[string]any{"http_status": resp.StatusCode}
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	msg := fmt.Sprintf("the room answered HTTP %d without a JSON-RPC response", resp.StatusCode)
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		data["error"] = e.Error
		if e.Message != "" {
			msg = e.Message
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		data["retry_after"] = ra
	}
	b.writeError(id, rpcInternalError, msg, data)
}

// writeAnswer writes the room's answer to a request (compact JSON), in
// the host's era.
func (b *bridge) writeAnswer(ctx context.Context, c *bridgeCall, msg []byte) {
	if c.shape != nil {
		msg = c.shape.shape(msg)
		if c.shape.after != nil {
			msg = c.shape.after(ctx, msg)
		}
		if c.cancelled.Load() {
			return
		}
	}
	b.writeCompact(msg)
}

// unreachable answers a request the room could not be asked or could not
// finish answering: -32603 with data.error "unavailable", so a host can
// tell "the room is gone, try later" from the room's own errors.
func (b *bridge) unreachable(id json.RawMessage, err error) {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = fmt.Sprintf("no answer within %s", b.reqTimeout)
	}
	b.log.Warn("the room is unreachable", "err", transport.Redact(why))
	b.writeError(id, rpcInternalError, "the room is unreachable: "+transport.Redact(why),
		map[string]any{"error": "unavailable", "retryable": true})
}

// isRPCResponse reports whether body is one JSON-RPC response object.
func isRPCResponse(body []byte) bool {
	_, ok := rpcResponse(body)
	return ok
}

// rpcResponse checks that body is one JSON-RPC response object and returns
// it compacted (one line), in one pass over the bytes that validates them.
func rpcResponse(body []byte) ([]byte, bool) {
	var buf bytes.Buffer
	buf.Grow(len(body))
	if json.Compact(&buf, body) != nil {
		return nil, false
	}
	msg := buf.Bytes()
	ms, ok := objectMembers(msg)
	if !ok {
		return nil, false
	}
	version, _ := member(ms, msg, "jsonrpc")
	_, hasID := member(ms, msg, "id")
	_, res := member(ms, msg, "result")
	_, er := member(ms, msg, "error")
	return msg, hasID && (res || er) && string(version) == `"2.0"`
}

// stream passes an SSE answer on frame by frame as it arrives. A stream
// that ends without the answer to id (the room went away) gets an
// unavailable error, unless the host cancelled it.
func (b *bridge) stream(c *bridgeCall, resp *http.Response, id json.RawMessage) {
	answered := false
	var data []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), bridgeMaxResponse)
	emit := func() {
		if len(data) == 0 {
			return
		}
		d := data
		data = nil
		if c.cancelled.Load() {
			return
		}
		if msg, ok := rpcResponse(d); ok {
			answered = true
			b.writeAnswer(context.Background(), c, msg)
			return
		}
		if c.shape == nil {
			b.writeLine(d) // a listen's frame; an old-era host never opens one
		}
	}
	for sc.Scan() {
		l := sc.Bytes()
		switch {
		case len(l) == 0:
			emit()
		case l[0] == ':':
		default:
			field, value, _ := bytes.Cut(l, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) == "data" {
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
		if c.cancelled.Load() {
			return
		}
	}
	emit()
	if answered || c.cancelled.Load() {
		return
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("the room's stream ended without an answer")
	}
	b.unreachable(id, err)
}

// notify forwards a notification before the bridge reads the next line,
// so the room hears it before any later request (a cancellation, then a
// new listen); the host gets no answer. A
// notifications/cancelled also stops the bridge's side of the request it
// names: nothing more is written for it and its stream is closed.
func (b *bridge) notify(ctx context.Context, line []byte, method string, params json.RawMessage) {
	b.log.Debug("forwarding a notification", "method", method)
	var target *bridgeCall
	if method == "notifications/cancelled" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.RequestID) > 0 {
			b.mu.Lock()
			target = b.inflight[idKey(p.RequestID)]
			b.mu.Unlock()
			if target != nil {
				target.cancelled.Store(true)
			}
			b.log.Debug("the host cancelled a request", "request_id", idKey(p.RequestID), "in_flight", target != nil)
		}
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(b.reqTimeout, bridgeNotifyTimeout))
	defer cancel()
	resp, err := b.post(nctx, line, method, params)
	if target != nil {
		target.cancel() // after the room heard it, so it ends the listen itself
	}
	if err != nil {
		b.log.Warn("a notification did not reach the room", "method", method, "err", transport.Redact(err.Error()))
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b.log.Warn("the room refused a notification", "method", method, "http_status", resp.StatusCode)
	}
}

// post sends one message to the room's /mcp with the headers the HTTP
// transport requires, taken from the message the host sent (spec §1.3).
func (b *bridge) post(ctx context.Context, line []byte, method string, params json.RawMessage) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(line))
	if err != nil {
		return nil, err
	}
	version, name, hasName := routingHeaders(method, params)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Mcp-Method", method)
	if hasName {
		req.Header.Set("Mcp-Name", headerValue(name))
	}
	return b.hc.Do(req)
}

// routingHeaders reads the protocol version from params._meta and the value
// of Mcp-Name from the member the method names (spec §1.3). params is part
// of a message already checked to be valid JSON.
func routingHeaders(method string, params json.RawMessage) (version, name string, hasName bool) {
	version = mcpProtocolVersion
	ms, ok := objectMembers(params)
	if !ok {
		return version, "", false
	}
	if meta, ok := member(ms, params, "_meta"); ok {
		mm, _ := objectMembers(meta)
		if raw, ok := member(mm, meta, metaVersionKey); ok {
			if v, ok := stringValue(raw); ok && v != "" {
				version = headerValue(v)
			}
		}
	}
	field := ""
	switch method {
	case "tools/call", "prompts/get":
		field = "name"
	case "resources/read":
		field = "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		field = "taskId"
	}
	if field == "" {
		return version, "", false
	}
	raw, ok := member(ms, params, field)
	if !ok {
		return version, "", false
	}
	name, ok = stringValue(raw)
	return version, name, ok
}

// headerValue is v as an HTTP header value: as it is when it survives the
// trip (visible ASCII and inner spaces), else in the spec's Base64 form
// =?base64?…?= — also when v itself looks like that form.
func headerValue(v string) string {
	safe := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; safe && i < len(v); i++ {
		if c := v[i]; (c < 0x21 || c > 0x7e) && c != ' ' {
			safe = false
		}
	}
	if safe {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// writeLine writes one message as one line; the room's JSON is compacted
// so a pretty-printed answer cannot span lines.
func (b *bridge) writeLine(msg []byte) {
	var buf bytes.Buffer
	if json.Compact(&buf, msg) != nil {
		buf.Reset()
		buf.Write(msg)
	}
	buf.WriteByte('\n')
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if _, err := b.out.Write(buf.Bytes()); err != nil {
		b.log.Warn("writing to stdout", "err", err)
	}
}

// writeCompact writes one message already known to be compact JSON.
func (b *bridge) writeCompact(msg []byte) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if _, err := b.out.Write(append(msg, '\n')); err != nil {
		b.log.Warn("writing to stdout", "err", err)
	}
}

// writeError writes a JSON-RPC error of the bridge's own.
func (b *bridge) writeError(id json.RawMessage, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": idOrNull(id), "error": e})
	b.writeLine(out)
}
