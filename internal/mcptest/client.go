package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// NoID as Request.ID sends a notification (no id member).
var NoID = &struct{ noID bool }{true}

// DropMeta as Request.Meta sends params without a _meta member.
var DropMeta = &struct{ drop bool }{true}

// Request is one MCP request. Zero fields take the conforming default, so a
// test states only what it breaks on purpose.
type Request struct {
	ID         any            // nil: the client's next integer; NoID: a notification; json.RawMessage: sent as it is
	Method     string         // the body's method, and Mcp-Method
	Params     map[string]any // params; a _meta member in it is kept when Meta is nil
	Meta       any            // replaces the whole _meta; DropMeta leaves it out
	Version    string         // the protocol version in the header and _meta ("" = Version)
	NoAuth     bool           // send no Authorization header
	Token      string         // a bearer other than the client's
	Set        map[string]string
	Del        []string
	Raw        any    // the exact body (string or []byte) instead of one built from the fields
	URL        string // "" = the client's /mcp URL
	HTTPMethod string // "" = POST; GET and DELETE send no body
	Opts       []ReqOpt
	Timeout    time.Duration // bounds the exchange (0: only the caller's context does)
}

// Client speaks MCP on one endpoint as one session. Copies made with
// WithTasks share the id counter, so ids stay unique per session.
type Client struct {
	hc    *http.Client
	url   string
	token string
	tasks bool // declare the Tasks extension in clientCapabilities
	name  string
	meta  map[string]any // the conforming _meta, built once (the bench calls in a loop)
	next  *atomic.Int64
}

// New is a client for the MCP endpoint url (…/mcp) as bearer token ("" =
// none), declaring the Tasks extension when tasks is set. clientName goes
// into clientInfo ("" = "ce-tests").
func New(hc *http.Client, url, token string, tasks bool, clientName string) *Client {
	if clientName == "" {
		clientName = "ce-tests"
	}
	c := &Client{hc: hc, url: url, token: token, tasks: tasks, name: clientName, next: new(atomic.Int64)}
	c.meta = Meta(Version, Caps(tasks), clientName)
	return c
}

// WithTasks is the same session declaring (or not) the Tasks extension.
func (c *Client) WithTasks(on bool) *Client {
	if on == c.tasks {
		return c
	}
	cp := *c
	cp.tasks = on
	cp.meta = Meta(Version, Caps(on), c.name)
	return &cp
}

// URL is the endpoint the client posts to.
func (c *Client) URL() string { return c.url }

// Token is the client's bearer.
func (c *Client) Token() string { return c.token }

// HTTP is the client's HTTP client.
func (c *Client) HTTP() *http.Client { return c.hc }

// Tasks reports whether the client declares the Tasks extension.
func (c *Client) Tasks() bool { return c.tasks }

// NewRequest builds q as an *http.Request; the id returned is the one in the
// body (nil for a notification or a raw body).
func (c *Client) NewRequest(ctx context.Context, q Request) (*http.Request, json.RawMessage, error) {
	version := q.Version
	if version == "" {
		version = Version
	}
	body, id, err := c.body(q, version)
	if err != nil {
		return nil, nil, err
	}
	url := q.URL
	if url == "" {
		url = c.url
	}
	method := q.HTTPMethod
	if method == "" {
		method = http.MethodPost
	}
	var send any = body
	if method == http.MethodGet || method == http.MethodDelete {
		send = nil
	}
	token := c.token
	if q.Token != "" {
		token = q.Token
	}
	if q.NoAuth {
		token = ""
	}
	req, err := NewHTTPRequest(ctx, method, url, token, send)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", Accept)
	req.Header.Set("MCP-Protocol-Version", version)
	if q.Method != "" {
		req.Header.Set("Mcp-Method", q.Method)
	}
	if f := NameField(q.Method); f != "" {
		if v, ok := q.Params[f].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	for k, v := range q.Set {
		req.Header.Set(k, v)
	}
	for _, k := range q.Del {
		req.Header.Del(k)
	}
	for _, o := range q.Opts {
		o(req)
	}
	return req, id, nil
}

// body is the request's JSON-RPC body and the id it carries.
func (c *Client) body(q Request, version string) ([]byte, json.RawMessage, error) {
	switch raw := q.Raw.(type) {
	case nil:
	case string:
		return []byte(raw), nil, nil
	case []byte:
		return raw, nil, nil
	default:
		return nil, nil, fmt.Errorf("Request.Raw must be a string or []byte, not %T", q.Raw)
	}
	var id json.RawMessage
	switch v := q.ID.(type) {
	case nil:
		id = strconv.AppendInt(nil, c.next.Add(1), 10)
	case json.RawMessage:
		id = v
	default:
		if q.ID != NoID {
			b, err := Marshal(v)
			if err != nil {
				return nil, nil, err
			}
			id = b
		}
	}
	params := make(map[string]any, len(q.Params)+1)
	for k, v := range q.Params {
		params[k] = v
	}
	_, hasMeta := params["_meta"]
	switch {
	case q.Meta == DropMeta:
	case q.Meta != nil:
		params["_meta"] = q.Meta
	case hasMeta:
	case version == Version:
		params["_meta"] = c.meta
	default:
		params["_meta"] = Meta(version, Caps(c.tasks), c.name)
	}
	b, err := Envelope(id, q.Method, params)
	return b, id, err
}

// Do sends q and reads the whole answer; only a transport failure is an error.
func (c *Client) Do(ctx context.Context, q Request) (Response, error) {
	if q.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.Timeout)
		defer cancel()
	}
	req, id, err := c.NewRequest(ctx, q)
	if err != nil {
		return Response{}, err
	}
	r, err := Send(c.hc, req)
	r.ID = id
	return r, err
}

// Open sends q (a subscriptions/listen) and, when the answer is a 200 event
// stream, returns it not yet read (Start reads it); otherwise it returns
// the finished answer. The stream lives until Close or the end of ctx.
func (c *Client) Open(ctx context.Context, q Request, name string) (*Stream, Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, id, err := c.NewRequest(ctx, q)
	if err != nil {
		cancel()
		return nil, Response{}, err
	}
	s, r, err := OpenSSE(c.hc, req, cancel, name)
	r.ID = id
	return s, r, err
}

// Call sends method with params the conforming way and returns the result;
// anything but HTTP 200 with a result is an *RPCError.
func (c *Client) Call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	r, err := c.Do(ctx, Request{Method: method, Params: params})
	if err != nil {
		name := ""
		if f := NameField(method); f != "" {
			name, _ = params[f].(string)
		}
		return nil, fmt.Errorf("%s %s: %w", method, name, err)
	}
	return r.Result()
}
