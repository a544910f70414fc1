//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestEpollReceiverAgainstBareServer reads real SSE streams from the bare
// SSE server (net/http, chunked) with the epoll receiver: every published
// change arrives once on every stream with its publish→receipt time, and
// closing from our side ends each stream as closed.
func TestEpollReceiverAgainstBareServer(t *testing.T) {
	tasks := []bareTask{{taskID: randomID("task"), handoffID: randomID("handoff")}}
	srv := httptest.NewServer(newBareSSE(tasks))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := newEpollReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	phase := &fanPhase{}
	var sink frameSink = phase
	var ptr atomic.Pointer[frameSink]
	ptr.Store(&sink)
	const streams, changes = 40, 25
	addr := strings.TrimPrefix(srv.URL, "http://")
	var ss []*listenStream
	for i := range streams {
		s, err := r.open(ctx, listenOptions{addr: addr, token: "bare", id: i + 1, taskIDs: []string{tasks[0].taskID}}, &ptr)
		if err != nil {
			t.Fatal(err)
		}
		if s.conn != nil {
			t.Fatal("the epoll receiver left the net.Conn open beside its own descriptor")
		}
		ss = append(ss, s)
	}
	p := &bareSSEProc{addr: addr, hc: newLoadClient(2)}
	d := &bareDriver{p: p}
	for range changes {
		if err := d.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for phase.frames.Load() < streams*changes && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	for i, s := range ss {
		if s.frames.Load() != changes || s.other.Load() != 0 || s.state.Load() != streamOpen {
			t.Fatalf("stream %d: %d frames (want %d), %d other, state %d", i, s.frames.Load(), changes, s.other.Load(), s.state.Load())
		}
	}
	if l := phase.lat.snapshot(); l.n != streams*changes || l.quantile(1) > 10*time.Second {
		t.Fatalf("publish→receipt: %d samples (want %d), max %v", l.n, streams*changes, l.quantile(1))
	}
	if mean := float64(phase.bytes.Load()) / float64(phase.frames.Load()); mean < 300 {
		t.Fatalf("mean frame %.0f B: sizes not counted as the server wrote them", mean)
	}
	for _, s := range ss {
		s.close(true)
		if s.state.Load() != streamClosed {
			t.Fatalf("a stream we closed ended in state %d", s.state.Load())
		}
	}
}

// TestEpollReceiverSeesHowStreamsEnd: a stream the server ends with its
// final result is graceful, one it cuts without is dropped, and bad chunk
// framing is broken; frames split across writes anywhere and keep-alive
// comments between them are read as the room's streams are.
func TestEpollReceiverSeesHowStreamsEnd(t *testing.T) {
	const frame = `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"lastUpdatedAt":"2026-01-01T00:00:00.000Z","taskId":"task_1"}}` + "\n\n"
	ack := func(id string) string {
		return `data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["task_1"]},"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}` + "\n\n"
	}
	writeSplit := func(w http.ResponseWriter, s string, at ...int) {
		rc := http.NewResponseController(w)
		prev := 0
		for _, i := range append(at, len(s)) {
			fmt.Fprint(w, s[prev:i])
			rc.Flush()
			time.Sleep(5 * time.Millisecond)
			prev = i
		}
	}
	for _, c := range []struct {
		name   string
		serve  func(w http.ResponseWriter)
		state  int32
		frames int64
	}{
		{"final result: graceful", func(w http.ResponseWriter) {
			writeSplit(w, ack("1")+frame+": keep-alive\n\n"+frame, 3, 60, len(ack("1"))+1, len(ack("1"))+len(frame)+4)
			writeSplit(w, `data: {"jsonrpc":"2.0","id":1,"result":{}}`+"\n\n")
		}, streamGraceful, 2},
		{"cut without a result: dropped", func(w http.ResponseWriter) {
			writeSplit(w, ack("1")+frame, 10)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}, streamDropped, 1},
		{"bad chunk framing: broken", func(w http.ResponseWriter) {
			writeSplit(w, ack("1")+frame)
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err == nil {
				buf.WriteString("zz\r\nnot a chunk\r\n")
				buf.Flush()
				time.Sleep(200 * time.Millisecond)
				conn.Close()
			}
		}, streamBroken, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				c.serve(w)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, err := newEpollReceiver()
			if err != nil {
				t.Fatal(err)
			}
			defer r.stop()
			var ptr atomic.Pointer[frameSink]
			s, err := r.open(ctx, listenOptions{addr: strings.TrimPrefix(srv.URL, "http://"), token: "x", id: 1, taskIDs: []string{"task_1"}}, &ptr)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.done:
			case <-ctx.Done():
				t.Fatal("the stream never ended")
			}
			if s.state.Load() != c.state || s.frames.Load() != c.frames || s.other.Load() != 0 {
				t.Fatalf("state %d (want %d), frames %d (want %d), other %d, err %v", s.state.Load(), c.state, s.frames.Load(), c.frames, s.other.Load(), s.err)
			}
		})
	}
}
