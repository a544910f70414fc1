package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// chunked encodes SSE text as HTTP/1.1 chunks of the given pieces, then the
// last chunk and its (optional) trailer.
func chunked(pieces []string, trailer string) string {
	var b strings.Builder
	for _, p := range pieces {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	return b.String() + "0\r\n" + trailer + "\r\n"
}

const (
	parserAck    = `data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`
	parserFrame1 = `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"lastUpdatedAt":"2026-01-01T00:00:00.001Z"}}`
	parserFrame2 = `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"lastUpdatedAt":"2026-01-01T00:00:00.002Z"}}`
	parserResult = `data: {"jsonrpc":"2.0","id":7,"result":{}}`
)

// TestChunkedSSEParsesWhereverReadsEnd feeds each body in two and in three
// pieces split at every possible place (inside a chunk-size line, between
// CR and LF, inside an SSE line, inside a keep-alive comment) and wants the
// same lines as one whole read, and the end of the body seen.
func TestChunkedSSEParsesWhereverReadsEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		want []string
		done bool
	}{
		{"one frame per chunk, keep-alive comments, the final result",
			chunked([]string{parserAck + "\n\n", ": keep-alive\n\n", parserFrame1 + "\n\n", parserFrame2 + "\n\n", ":\n\n", parserResult + "\n\n"}, ""),
			[]string{parserAck, parserFrame1, parserFrame2, parserResult}, true},
		{"frames split across chunks, CRLF line endings",
			chunked([]string{parserAck[:10], parserAck[10:] + "\r\n\r\n" + parserFrame1[:33], parserFrame1[33:] + "\r", "\n\r\n", parserFrame2 + "\n", "\n"}, ""),
			[]string{parserAck, parserFrame1, parserFrame2}, true},
		{"several frames in one chunk, a comment split across chunks",
			chunked([]string{parserFrame1 + "\n\n: keep", "-alive\n\n" + parserFrame2 + "\n\n" + parserResult + "\n\n"}, ""),
			[]string{parserFrame1, parserFrame2, parserResult}, true},
		{"upper-case sizes, extensions and trailers",
			strings.ToUpper(fmt.Sprintf("%x", len(parserFrame1)+2)) + ";name=value\r\n" + parserFrame1 + "\n\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
			[]string{parserFrame1}, true},
		{"a body still open",
			chunked([]string{parserAck + "\n\n", parserFrame1 + "\n\n"}, "")[:len(chunked([]string{parserAck + "\n\n", parserFrame1 + "\n\n"}, ""))-5],
			[]string{parserAck, parserFrame1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			parse := func(pieces ...string) ([]string, bool) {
				var p chunkedSSE
				var got []string
				for _, piece := range pieces {
					if err := p.feed([]byte(piece), func(l []byte) { got = append(got, string(l)) }); err != nil {
						t.Fatalf("split %q: %v", pieces, err)
					}
				}
				return got, p.done()
			}
			check := func(pieces ...string) {
				got, done := parse(pieces...)
				if !slices.Equal(got, c.want) || done != c.done {
					t.Fatalf("split at %d pieces %q:\n got %q (done %v)\nwant %q (done %v)", len(pieces), pieces, got, done, c.want, c.done)
				}
			}
			check(c.body)
			for i := range len(c.body) + 1 {
				check(c.body[:i], c.body[i:])
			}
			for i := 0; i <= len(c.body); i += 7 {
				for j := i; j <= len(c.body); j += 3 {
					check(c.body[:i], c.body[i:j], c.body[j:])
				}
			}
			// One byte at a time.
			pieces := make([]string, len(c.body))
			for i := range c.body {
				pieces[i] = c.body[i : i+1]
			}
			check(pieces...)
		})
	}
}

// TestChunkedSSERefusesBrokenFraming: a body that is not valid chunked
// coding is an error (the stream then counts as broken), never frames made
// up from the garbage.
func TestChunkedSSERefusesBrokenFraming(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"a size that is not hex", "zz\r\n"},
		{"a size line without LF", "5\rx"},
		{"data longer than its size", "3\r\nabcd\r\n"},
		{"data not followed by CR LF", "3\r\nabcX\n"},
		{"bytes after the last chunk", "0\r\n\r\nmore"},
		{"an empty size", "\r\n"},
		{"a size too large", "1000000000000000\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p chunkedSSE
			if err := p.feed([]byte(c.body), func([]byte) {}); err == nil {
				t.Fatalf("no error for %q", c.body)
			}
		})
	}
	t.Run("an SSE line over the bound", func(t *testing.T) {
		var p chunkedSSE
		big := strings.Repeat("x", maxSSELine/2)
		body := fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n%x\r\n%s\r\n", len(big), big, len(big), big, 1, "y")
		if err := p.feed([]byte(body), func([]byte) {}); err == nil {
			t.Fatal("no error for a line longer than maxSSELine")
		}
	})
}
