package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/room"
)

// readBody reads the whole body, bounded by the bytes actually read (so a
// chunked body without Content-Length is bounded too).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// The body's read deadline was set when the request came in (bound)
	// and is lifted once the body has been read to its end.
	body := http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
	b, err := io.ReadAll(body)
	if err != nil {
		// The rest of a refused body is never read: close the connection
		// after the answer instead of draining it.
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, room.Errorf(room.KindBodyTooLarge, "request body is larger than %d bytes", s.limits.MaxBodyBytes)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, room.Errorf(room.KindInvalidRequest, "the request body did not arrive within %s", s.bodyTimeout)
		}
		return nil, room.Errorf(room.KindInvalidRequest, "could not read the request body")
	}
	return b, nil
}

// decodeJSON reads a JSON object into v. An empty body is an empty object.
// Wrong types name the field; trailing data is refused. Unknown fields are
// ignored so newer clients keep working against this server.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return wirejson.DecodeArgs(b, v)
}

// queryInt64 reads an optional integer query parameter.
func queryInt64(r *http.Request, name string) (*int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "%s must be an integer", name).With("field", name)
	}
	return &n, nil
}
