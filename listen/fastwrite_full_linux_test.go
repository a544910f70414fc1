//go:build linux && (amd64 || arm64)

package listen

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/commonroom/ce/listen/internal/sock"
)

// A fast write to a socket whose buffers are full takes nothing: the whole
// chunk, its size line included, becomes the stream's leftover, every frame
// of it is still owed, the stream's goroutine is woken to write it, and the
// stream is not marked written (the keep-alive and the probe must not count
// bytes that never left). The end-to-end tests see this path only by chance
// (their fall-backs are partial writes), so it is pinned here on a real
// loopback socket filled until the kernel refuses a byte.
func TestFastWriteToAFullSocketLeavesTheWholeChunk(t *testing.T) {
	server := tcpPair(t)
	raw, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fw := &fastWriter{raw: sock.NewRawWriter(raw), tag: []byte(`"id":7`)}
	fillUntilRefused(t, fw.raw)

	var frames []*queued
	for i := 1; i <= 2; i++ {
		f, ok := newTestFrame(testMethod, json.RawMessage(`{"seq":`+strconv.Itoa(i)+`}`))
		if !ok {
			t.Fatal("test frame did not encode")
		}
		frames = append(frames, &queued{Frame: f})
	}
	q := newFrameQueue(8)
	fw.wmu.Lock()
	_, wrote, of, whole := fw.write(&q, frames, nil)
	carry, carryFrames := append([]byte(nil), fw.carry...), fw.carryFrames
	fw.wmu.Unlock()

	var body []byte
	for _, f := range frames {
		body = f.AppendTo(body, fw.tag)
	}
	want := append(append([]byte(strconv.FormatInt(int64(len(body)), 16)+"\r\n"), body...), "\r\n"...)
	switch {
	case wrote != 0:
		t.Fatalf("the kernel took %d bytes of a full socket; the test's fill did not hold", wrote)
	case of != len(want):
		t.Fatalf("the chunk was %d bytes, want %d", of, len(want))
	case whole != 0:
		t.Fatalf("%d frames counted as written, want 0", whole)
	case !bytes.Equal(carry, want):
		t.Fatalf("leftover\n%q\nwant the whole chunk\n%q", carry, want)
	case carryFrames != len(frames):
		t.Fatalf("leftover finishes %d frames, want %d", carryFrames, len(frames))
	case len(q.wake) != 1:
		t.Fatal("the stream's goroutine was not woken to write the leftover")
	case fw.dirty.Load() || fw.last.Load() != 0:
		t.Fatal("a write that sent nothing marked the stream written")
	}
}

// tcpPair returns the server's end of a loopback connection whose ends
// buffer little: the server's send buffer and the client's receive buffer
// are a few KiB, and the client, open until the test ends, never reads.
func tcpPair(t *testing.T) *net.TCPConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := tinyRecvDialer(t).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sc := s.(*net.TCPConn)
	if err := sc.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	return sc
}

// fillUntilRefused writes through w until the kernel takes nothing more.
func fillUntilRefused(t *testing.T, w *sock.RawWriter) {
	t.Helper()
	chunk := bytes.Repeat([]byte("x"), 1024)
	total := 0
	for range 1 << 16 {
		n, err := w.Try(chunk)
		total += n
		if errors.Is(err, syscall.EAGAIN) && n == 0 {
			// Refused: once more with one byte, in case only a large write was.
			if n, err := w.Try(chunk[:1]); errors.Is(err, syscall.EAGAIN) && n == 0 {
				return
			}
			continue
		}
		if err != nil {
			t.Fatalf("filling the socket after %d bytes: %v", total, err)
		}
	}
	t.Fatalf("the socket took %d bytes and never refused one", total)
}
