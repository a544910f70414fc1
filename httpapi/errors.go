package httpapi

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/commonroom/ce/room"
)

// kindStatus is the one mapping of error kinds to HTTP statuses
// (spec/domain.md §1.11 and §6.5), in the order /protocol lists the codes.
var kindStatus = []struct {
	kind   room.Kind
	status int
}{
	{room.KindUnauthorized, http.StatusUnauthorized},
	{room.KindSessionExpired, http.StatusUnauthorized},
	{room.KindPermissionDenied, http.StatusForbidden},
	{room.KindInvitationExpired, http.StatusForbidden},
	{room.KindInvitationRevoked, http.StatusForbidden},
	{room.KindInvitationRedeemed, http.StatusForbidden},
	{room.KindUnsupportedVersion, http.StatusBadRequest},
	{room.KindLeaseConflict, http.StatusConflict},
	{room.KindStaleVersion, http.StatusConflict},
	{room.KindProposalNotFound, http.StatusNotFound},
	{room.KindProposalConflict, http.StatusConflict},
	{room.KindInvalidRegion, http.StatusBadRequest},
	{room.KindVersionNotFound, http.StatusNotFound},
	{room.KindTransportUnavailable, http.StatusServiceUnavailable},
	{room.KindLimitExceeded, http.StatusTooManyRequests},
	{room.KindBodyTooLarge, http.StatusRequestEntityTooLarge},
	{room.KindInvalidRequest, http.StatusBadRequest},
	{room.KindHandoffNotFound, http.StatusNotFound},
	{room.KindHandoffConflict, http.StatusConflict},
	{room.KindTaskNotFound, http.StatusNotFound},
	{room.KindNotFound, http.StatusNotFound},
	{room.KindOverloaded, http.StatusServiceUnavailable},
	{room.KindUnavailable, http.StatusServiceUnavailable},
	{room.KindRoomBusy, http.StatusConflict},
	{room.KindInternal, http.StatusInternalServerError},
}

// httpStatus is kindStatus for lookups.
var httpStatus = func() map[room.Kind]int {
	m := make(map[room.Kind]int, len(kindStatus))
	for _, ks := range kindStatus {
		m[ks.kind] = ks.status
	}
	return m
}()

// errorCodes are the codes a client of the room can see, as /protocol and
// /.well-known list them: every kind of kindStatus under its wire name,
// once. room_busy is left out: it answers a second writer process (the
// CLI), never a request to the serving room.
var errorCodes = func() []string {
	var out []string
	for _, ks := range kindStatus {
		if c := wireKind(ks.kind); ks.kind != room.KindRoomBusy && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}()

// wireKind is the error code a client sees. A body over the limit is the
// original's limit_exceeded, sent with 413.
func wireKind(k room.Kind) string {
	if k == room.KindBodyTooLarge {
		return string(room.KindLimitExceeded)
	}
	return string(k)
}

// ErrorBody is the Commonroom error object: {error, message, …recovery
// fields at the top level}. Agents branch on error, never on message.
// Every string in it is bounded (boundStrings): an id, selector or URI the
// client sent comes back cut, never whole.
func ErrorBody(err error) map[string]any {
	e := room.AsError(err)
	body := map[string]any{}
	for k, v := range e.Fields {
		body[k] = v
	}
	body = boundStrings(body).(map[string]any)
	body["error"] = wireKind(e.Kind)
	body["message"] = clip(e.Message, maxErrorString)
	return body
}

// maxErrorString is the most bytes of one string an error answer carries
// (then "…"). Messages are far shorter; what is longer is an echo of input.
const maxErrorString = 256

// boundStrings returns v with every string in it (in maps and slices, at any
// depth) cut to maxErrorString bytes. It is applied to every error body,
// HTTP and MCP alike, so no error can send a client's huge input back to
// it. Structs are the server's own records and are left as they are; so is
// "diff", the stale_version diff, which is bounded where it is made.
func boundStrings(v any) any {
	switch x := v.(type) {
	case string:
		return clip(x, maxErrorString)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k == "diff" {
				out[k] = e
				continue
			}
			out[clip(k, maxErrorString)] = boundStrings(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[clip(k, maxErrorString)] = clip(e, maxErrorString)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = boundStrings(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = clip(e, maxErrorString)
		}
		return out
	}
	return v
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// StatusOf returns the HTTP status for err.
func StatusOf(err error) int {
	if s, ok := httpStatus[room.ErrorKind(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// sendJSON writes v as JSON (and a newline) with status: the bytes of
// json.Marshal. The encoder writes straight into the response, so a large
// answer exists once in memory while it is sent, not twice (a Marshal result
// and its copy); a list is encoded one element at a time (streamList), so a
// client that does not read holds the list but not its encoding.
func sendJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	out := &statusOnWrite{w: w, status: status}
	var err error
	if rv := reflect.ValueOf(v); streamable(rv) {
		err = streamList(out, rv)
	} else {
		err = json.NewEncoder(out).Encode(v)
	}
	var werr writeError
	switch {
	case err == nil || errors.As(err, &werr):
		// Sent, or the client is gone: nothing more to say.
	case !out.wrote:
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"internal","message":"internal error"}` + "\n"))
	default:
		// Half a list is out and the rest cannot be encoded: break the
		// connection rather than end a truncated answer as if it were whole.
		panic(http.ErrAbortHandler)
	}
}

// streamable reports whether v is a list sendJSON encodes element by
// element: a non-nil slice (not bytes) whose type has no JSON method of its
// own, long enough for it to matter.
func streamable(v reflect.Value) bool {
	if v.Kind() != reflect.Slice || v.IsNil() || v.Len() < 2 || v.Type().Elem().Kind() == reflect.Uint8 {
		return false
	}
	t := v.Type()
	return !t.Implements(reflect.TypeFor[json.Marshaler]()) && !t.Implements(reflect.TypeFor[encoding.TextMarshaler]())
}

// streamChunk is how much encoded text streamList gathers per write.
const streamChunk = 64 << 10

// streamList writes the slice v as json.Marshal would, one element's
// encoding at a time. Each element is encoded through a pointer to it, as
// encoding/json encodes the (addressable) elements of a slice.
func streamList(w io.Writer, v reflect.Value) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	flush := func() error {
		if _, err := w.Write(buf.Bytes()); err != nil {
			return writeError{err}
		}
		buf.Reset()
		return nil
	}
	buf.WriteByte('[')
	for i := range v.Len() {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(v.Index(i).Addr().Interface()); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		if buf.Len() >= streamChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	buf.WriteString("]\n")
	return flush()
}

// writeError marks a failure to write, as opposed to one to encode.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// statusOnWrite sends the status with the first bytes of the body, so an
// encoder that fails before writing anything leaves the status free for an
// error answer.
type statusOnWrite struct {
	w      http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusOnWrite) Write(b []byte) (int, error) {
	if !s.wrote {
		s.wrote = true
		s.w.WriteHeader(s.status)
	}
	n, err := s.w.Write(b)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

// sendError writes a domain error. Internal errors are logged with the
// request's correlation id; their cause never reaches the client.
// logFailure logs an internal failure at Error, except a request whose
// client went away mid-way: nothing failed but the wait, and an operator
// scanning for errors should not see every closed browser tab.
func (s *Server) logFailure(msg string, err error, attrs ...any) {
	if errors.Is(err, context.Canceled) {
		s.log.Debug(msg+": the client went away", attrs...)
		return
	}
	s.log.Error(msg, append(attrs, "err", err)...)
}

func (s *Server) sendError(w http.ResponseWriter, r *http.Request, err error) {
	e := room.AsError(err)
	if e.Kind == room.KindInternal {
		s.logFailure("request failed", err, "request_id", requestID(r), "path", r.URL.Path)
	}
	if e.Kind == room.KindUnauthorized || e.Kind == room.KindSessionExpired {
		w.Header().Set("WWW-Authenticate", `Bearer realm="commonroom"`)
	}
	if e.Kind == room.KindOverloaded || e.Kind == room.KindLimitExceeded && e.Fields["retry_after_seconds"] != nil {
		w.Header().Set("Retry-After", "1")
	}
	sendJSON(w, StatusOf(e), ErrorBody(e))
}
