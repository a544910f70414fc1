package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ReqOpt adjusts a request just before it is sent (a header, the Host, a
// cookie, a context).
type ReqOpt = func(*http.Request)

// WithBearer sends token as the bearer ("" sends none).
func WithBearer(token string) ReqOpt {
	return func(r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
}

// WithHeader sets one header.
func WithHeader(k, v string) ReqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

// WithHost sends the request with another Host (the Host/Origin guard's tests).
func WithHost(host string) ReqOpt { return func(r *http.Request) { r.Host = host } }

// WithCookie adds a cookie (the owner page's session).
func WithCookie(c *http.Cookie) ReqOpt { return func(r *http.Request) { r.AddCookie(c) } }

// Response is one finished HTTP exchange, plain or MCP. The body is read
// whole and not judged: what counts as success is the caller's business.
type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	// ID is the JSON-RPC id the request carried (nil for plain HTTP, a
	// notification or a raw body), so a caller can check it was echoed.
	ID json.RawMessage
}

// BodyReader turns a body argument into a reader: nil is no body, string
// and []byte are sent as they are, an io.Reader is streamed, anything else
// is marshalled as JSON.
func BodyReader(body any) (io.Reader, error) {
	switch b := body.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.NewReader(b), nil
	case []byte:
		return bytes.NewReader(b), nil
	case io.Reader:
		return b, nil
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(j), nil
	}
}

// NewHTTPRequest builds one plain request: a JSON Content-Type when there is
// a body, a bearer when token is not "", then opts.
func NewHTTPRequest(ctx context.Context, method, url, token string, body any, opts ...ReqOpt) (*http.Request, error) {
	rd, err := BodyReader(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, o := range opts {
		o(req)
	}
	return req, nil
}

// Do sends one plain HTTP request (see NewHTTPRequest) and reads the whole
// answer. A transport failure is the error; any status is a Response.
func Do(ctx context.Context, hc *http.Client, method, url, token string, body any, opts ...ReqOpt) (Response, error) {
	req, err := NewHTTPRequest(ctx, method, url, token, body, opts...)
	if err != nil {
		return Response{}, err
	}
	return Send(hc, req)
}

// Send sends req and reads the whole answer.
func Send(hc *http.Client, req *http.Request) (Response, error) {
	res, err := hc.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, fmt.Errorf("reading the answer: %w", err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Raw: b}, nil
}

// Into decodes the body into v.
func (r Response) Into(v any) error {
	if err := json.Unmarshal(r.Raw, v); err != nil {
		return fmt.Errorf("answer %d does not decode into %T: %v: %.300s", r.Status, v, err, r.Raw)
	}
	return nil
}

// RPCError is a JSON-RPC error object, or an HTTP failure on /mcp that
// carried none (Code 0, Body set).
type RPCError struct {
	Status  int            `json:"-"`
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
	Body    string         `json:"-"`
}

// Error says what failed: the JSON-RPC code and message, or the HTTP status and body.
func (e *RPCError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("HTTP %d, JSON-RPC %d %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body)
}

// Reply is a JSON-RPC answer's envelope: the id, and a result or an error.
type Reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// Reply decodes the answer's JSON-RPC envelope.
func (r Response) Reply() (Reply, error) {
	var rep Reply
	if err := json.Unmarshal(r.Raw, &rep); err != nil {
		return rep, &RPCError{Status: r.Status, Body: Clip(r.Raw)}
	}
	if rep.Error != nil {
		rep.Error.Status = r.Status
	}
	return rep, nil
}

// Result is the answer's result: anything but HTTP 200 with a result is an
// *RPCError.
func (r Response) Result() (json.RawMessage, error) {
	rep, err := r.Reply()
	if err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error
	}
	if r.Status != http.StatusOK || rep.Result == nil {
		return nil, &RPCError{Status: r.Status, Body: Clip(r.Raw)}
	}
	return rep.Result, nil
}

// Clip shortens a body for an error message.
func Clip(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
