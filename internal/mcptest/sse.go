package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Frame is one SSE event as it came off the wire.
type Frame struct {
	Event string // the event: field ("" when absent)
	ID    string // the id: field ("" when absent)
	Data  []byte // the data: lines joined by "\n"
}

// String is the frame's data, shortened for a failure message.
func (f Frame) String() string { return Clip(f.Data) }

// Stream is one open SSE response. Its reader goroutine (started by Start,
// so a test can hold a stalled reader) parses events into a list the caller
// consumes in order; keep-alive comments are counted, not returned.
type Stream struct {
	Name   string
	Header http.Header

	body   io.ReadCloser
	cancel context.CancelFunc

	mu       sync.Mutex
	frames   []Frame
	pos      int
	comments int
	partial  int // bytes of an event cut off by the end of the stream
	started  bool
	ended    bool
	endErr   error
	wake     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// OpenSSE sends req and, when the answer is a 200 text/event-stream,
// returns the stream (not yet read). Any other answer is read whole and
// returned as a finished Response. cancel ends req's context; the stream
// calls it on Close.
func OpenSSE(hc *http.Client, req *http.Request, cancel context.CancelFunc, name string) (*Stream, Response, error) {
	res, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, Response{}, fmt.Errorf("%s: %w", name, err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		defer cancel()
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return nil, Response{Status: res.StatusCode, Header: res.Header, Raw: b}, nil
	}
	s := NewStream(name, res.Body, cancel)
	s.Header = res.Header
	return s, Response{Status: res.StatusCode, Header: res.Header}, nil
}

// NewStream reads SSE from body (a response body or a raw connection);
// cancel (may be nil) is called on Close.
func NewStream(name string, body io.ReadCloser, cancel context.CancelFunc) *Stream {
	if cancel == nil {
		cancel = func() {}
	}
	return &Stream{Name: name, body: body, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Start starts the reader goroutine; it is idempotent.
func (s *Stream) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	go s.loop()
}

func (s *Stream) loop() {
	defer close(s.done)
	br := bufio.NewReaderSize(s.body, 64<<10)
	var f Frame
	have := false
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if err != nil {
			s.mu.Lock()
			s.partial = len(f.Data) + len(line)
			s.mu.Unlock()
			break
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch {
		case len(line) == 0:
			if have {
				s.mu.Lock()
				s.frames = append(s.frames, f)
				s.mu.Unlock()
				s.signal()
			}
			f, have = Frame{}, false
		case len(field) == 0: // a comment (keep-alive)
			s.mu.Lock()
			s.comments++
			s.mu.Unlock()
		case string(field) == "data":
			if have {
				f.Data = append(f.Data, '\n')
			}
			f.Data = append(f.Data, value...)
			have = true // an event without data is not dispatched (the SSE rules)
		case string(field) == "event":
			f.Event = string(value)
		case string(field) == "id":
			f.ID = string(value)
		default: // retry: and unknown fields carry nothing a test reads
		}
	}
	s.mu.Lock()
	s.ended = true
	if !errors.Is(err, io.EOF) {
		s.endErr = err
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next returns the next unread frame, or an error when the stream ends or
// ctx does. The error names the frames seen so far.
func (s *Stream) Next(ctx context.Context) (Frame, error) {
	for {
		s.mu.Lock()
		if s.pos < len(s.frames) {
			f := s.frames[s.pos]
			s.pos++
			s.mu.Unlock()
			return f, nil
		}
		ended, endErr := s.ended, s.endErr
		s.mu.Unlock()
		if ended {
			return Frame{}, fmt.Errorf("%s: the stream ended (err %v) while a frame was expected; %s", s.Name, endErr, s.seen())
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return Frame{}, fmt.Errorf("%s: no frame within the deadline: %w; %s", s.Name, ctx.Err(), s.seen())
		}
	}
}

// seen describes what the stream has delivered, for a failure message.
func (s *Stream) seen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "seen %d frame(s) and %d comment(s)", len(s.frames), s.comments)
	from := max(0, len(s.frames)-3)
	for _, f := range s.frames[from:] {
		fmt.Fprintf(&b, "\n  event %q id %q: %s", f.Event, f.ID, f)
	}
	return b.String()
}

// End waits for the stream to end and returns the frames not yet read.
func (s *Stream) End(ctx context.Context) ([]Frame, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: the stream did not end within the deadline; %s", s.Name, s.seen())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rest := slices.Clone(s.frames[s.pos:])
	s.pos = len(s.frames)
	return rest, nil
}

// Ended reports whether the server has ended the stream (or the connection broke).
func (s *Stream) Ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Done is closed when the stream has ended and its reader has stopped.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Frames is every frame received so far, read or not.
func (s *Stream) Frames() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

// Comments is how many comment lines (keep-alives) arrived.
func (s *Stream) Comments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.comments
}

// Partial is how many bytes of an unfinished event the end of the stream cut off.
func (s *Stream) Partial() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partial
}

// Close abandons the stream from the client side. It is idempotent.
func (s *Stream) Close() {
	s.once.Do(func() {
		s.cancel()
		s.body.Close()
	})
}

// Wait is Next bounded by d, failing t with what was seen when no frame
// arrives.
func (s *Stream) Wait(t testing.TB, d time.Duration) Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	f, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// WaitEnd is End bounded by d, failing t when the stream stays open.
func (s *Stream) WaitEnd(t testing.TB, d time.Duration) []Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rest, err := s.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rest
}
