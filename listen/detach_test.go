package listen

import (
	"errors"
	"io"
	"strconv"
	"testing"
	"time"
)

// A detached stream gives its handler back as soon as the acknowledgement is
// out (no goroutine, request or net/http buffers held per stream) and still
// gets every frame and a well-formed end; a stream served in place keeps its
// handler until it ends and its connection after.
func TestDetachedStreamReleasesItsHandler(t *testing.T) {
	cases := []struct {
		name    string
		inPlace bool
	}{
		{"detached: handler returns while the stream lives, connection closed after the end", false},
		{"in place: handler held until the end, connection kept for reuse", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			ts := newTestServer(t, Config{})
			ts.inPlace = tc.inPlace
			c := ts.mustOpen(ctx, "s1", "1", []string{"t"}, 0)
			ts.hub.Publish(Batch{Messages: []Message{msg("t", 1)}})
			if err := c.expectSeqs(1); err != nil {
				t.Fatal(err)
			}
			if !tc.inPlace {
				select {
				case <-ts.returned:
				case <-ctx.Done():
					t.Fatal("the handler of a live detached stream never returned")
				}
			}
			ts.hub.Publish(Batch{Messages: []Message{msg("t", 2)}})
			if err := c.expectSeqs(2); err != nil {
				t.Fatal(err)
			}
			if tc.inPlace {
				select {
				case <-ts.returned:
					t.Fatal("an in-place handler returned while its stream was live")
				default:
				}
			}
			ts.cancelGracefully(ctx, t, c, "s1", "1")
			// After the body: a detached stream's connection is closed; an
			// in-place one stays open for the next request.
			_ = c.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := c.conn.Read(make([]byte, 1))
			if tc.inPlace {
				var ne interface{ Timeout() bool }
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("in-place connection after the end: %v, want it still open", err)
				}
				return
			}
			_ = c.conn.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := c.conn.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("detached connection after the end: %v, want EOF", err)
			}
		})
	}
}

// Close is the shutdown step "end streams gracefully": it returns only once
// every detached stream has written its final frame and ended, as
// http.Server.Shutdown waits for handlers serving in place.
func TestCloseWaitsForDetachedStreams(t *testing.T) {
	const n = 100
	ctx := testCtx(t)
	ts := newTestServer(t, Config{})
	streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "ses-" + strconv.Itoa(i), streamID(i), []string{"t"}
	})
	for range n {
		select {
		case <-ts.returned:
		case <-ctx.Done():
			t.Fatal("handlers of detached streams did not return")
		}
	}
	ts.hub.Publish(Batch{Messages: []Message{msg("t", 1)}})
	ts.hub.Close()
	if got := len(ts.ends); got != n {
		t.Fatalf("%d of %d streams had ended when Close returned", got, n)
	}
	for range n {
		if e := <-ts.ends; e.reason != EndShutdown {
			t.Fatalf("stream %s ended with %v, want shutdown", e.session, e.reason)
		}
	}
	forEach(t, streams, func(c *clientStream) error {
		if err := c.expectSeqs(1); err != nil {
			return err
		}
		return c.expectFinal()
	})
}
