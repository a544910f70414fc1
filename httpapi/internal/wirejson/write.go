package wirejson

import "net/http"

// WriteError marks a failure to write, as opposed to one to encode: an
// encoder that fails on a WriteError lost its client, and there is nobody
// left to send an error answer to.
type WriteError struct{ Err error }

func (e WriteError) Error() string { return e.Err.Error() }

// Unwrap returns the writer's own error.
func (e WriteError) Unwrap() error { return e.Err }

// StatusOnWrite sends the status with the first bytes of the body, so an
// encoder that fails before writing anything leaves the status free for an
// error answer. Both doors encode answers straight into the response
// through it (no copy of a large answer is held while it is sent).
type StatusOnWrite struct {
	W      http.ResponseWriter
	Status int
	// Wrote is set once the status and the first bytes went out.
	Wrote bool
}

// Write sends the status first, then b; a failure is a WriteError.
func (s *StatusOnWrite) Write(b []byte) (int, error) {
	if !s.Wrote {
		s.Wrote = true
		s.W.WriteHeader(s.Status)
	}
	n, err := s.W.Write(b)
	if err != nil {
		err = WriteError{err}
	}
	return n, err
}
