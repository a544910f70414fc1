package roomtest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// Response is a finished plain-HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object, failing t when it is not one.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// Into decodes the body into v, failing t when it does not fit.
func (r Response) Into(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d does not decode into %T: %v\n%s", r.Status, v, err, r.Body)
	}
}

// Do sends one request and reports a transport failure to t; token "" sends
// no Authorization header.
func (h *Harness) Do(t testing.TB, method, url, token string, body any, opts ...mcptest.ReqOpt) Response {
	t.Helper()
	r, err := h.Send(method, url, token, body, opts...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// Send is Do returning the transport error instead of failing a test (for
// goroutines and tests of connection limits).
func (h *Harness) Send(method, url, token string, body any, opts ...mcptest.ReqOpt) (Response, error) {
	r, err := mcptest.Do(context.Background(), h.client, method, url, token, body, opts...)
	if err != nil {
		return Response{}, err
	}
	h.NoteError(r)
	return Response{Status: r.Status, Header: r.Header, Body: r.Raw}, nil
}

// NoteError keeps the body of an error answer (status >= 400), so a test can
// scan every refusal it provoked for a leaked secret (ErrorBodies).
func (h *Harness) NoteError(r mcptest.Response) {
	if r.Status >= 400 {
		h.mu.Lock()
		h.errs = append(h.errs, string(r.Raw))
		h.mu.Unlock()
	}
}

// ErrorBodies is every error body the harness has received.
func (h *Harness) ErrorBodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}

// WantError checks a plain-HTTP refusal: the status, the error code, a
// message, and a JSON content type. It returns the decoded body.
func WantError(t testing.TB, r Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (%s); body %s", r.Status, status, code, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	m := r.JSON(t)
	if m["error"] != code {
		t.Fatalf("error = %v, want %q; body %s", m["error"], code, r.Body)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("error body has no message: %s", r.Body)
	}
	return m
}

// WantOK checks a 200 answer.
func WantOK(t testing.TB, r Response) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", r.Status, r.Body)
	}
}
