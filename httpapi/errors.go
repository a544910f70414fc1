package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/room"
)

// kindStatus is the one mapping of error kinds to HTTP statuses
// (ARCHITECTURE.md D37), in the order /protocol lists the codes.
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
		if c := wirejson.Kind(ks.kind); ks.kind != room.KindRoomBusy && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}()

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
	out := &wirejson.StatusOnWrite{W: w, Status: status}
	var err error
	if rv := reflect.ValueOf(v); streamable(rv) {
		err = streamList(out, rv)
	} else {
		err = json.NewEncoder(out).Encode(v)
	}
	var werr wirejson.WriteError
	switch {
	case err == nil || errors.As(err, &werr):
		// Sent, or the client is gone: nothing more to say.
	case !out.Wrote:
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
			return wirejson.WriteError{Err: err}
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

// logFailure logs an internal failure with this server's logger
// (wirejson.LogFailure: a client that went away is not an error).
func (s *Server) logFailure(msg string, err error, attrs ...any) {
	wirejson.LogFailure(s.log, msg, err, attrs...)
}

// sendError writes a domain error. Internal errors are logged with the
// request's correlation id; their cause never reaches the client.
func (s *Server) sendError(w http.ResponseWriter, r *http.Request, err error) {
	e := room.AsError(err)
	noteError(r, wirejson.Kind(e.Kind))
	if e.Kind == room.KindInternal {
		s.logFailure("request failed", err, "request_id", requestID(r), "path", r.URL.Path)
	}
	if e.Kind == room.KindUnauthorized || e.Kind == room.KindSessionExpired {
		w.Header().Set("WWW-Authenticate", `Bearer realm="commonroom"`)
	}
	if e.Kind == room.KindOverloaded || e.Kind == room.KindLimitExceeded && e.Fields["retry_after_seconds"] != nil {
		w.Header().Set("Retry-After", retryAfter(e.Fields["retry_after_seconds"]))
	}
	sendJSON(w, StatusOf(e), wirejson.ErrorBody(e))
}

// retryAfter is the Retry-After header for an error's retry_after_seconds:
// the seconds it names when it is a whole number of at least one, else 1.
func retryAfter(v any) string {
	switch n := v.(type) {
	case int:
		if n >= 1 {
			return strconv.Itoa(n)
		}
	case int64:
		if n >= 1 {
			return strconv.FormatInt(n, 10)
		}
	}
	return "1"
}
