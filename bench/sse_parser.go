package main

import (
	"bytes"
	"errors"
	"fmt"
)

// chunkedSSE is an incremental parser for the body of a listen stream as
// it comes off the socket: HTTP/1.1 chunked transfer coding around
// server-sent events. The epoll receiver feeds it whatever one read(2)
// returned, which may end anywhere (in a chunk-size line, between a chunk's
// CR and LF, in the middle of an SSE line); it hands back every complete
// SSE line that is not empty and not a comment, the same lines
// listenStream.line returns on the goroutine receiver. The room writes one
// data line per event, so a line is a frame (a multi-line event would show
// its extra lines as frames of an unexpected kind, which fails the run
// rather than hiding). Nothing is copied unless a line spans two reads.
type chunkedSSE struct {
	state   int
	size    int64  // bytes left in the current chunk (chunkData), or the size being read (chunkSize)
	digits  int    // hex digits read for the current size
	partial []byte // the start of an SSE line split across reads or chunks
	skip    bool   // the line in progress is a comment or too long: drop it
}

const (
	chunkSize    = iota // reading the chunk-size hex digits
	chunkExt            // after the digits: an extension until CR LF
	chunkSizeLF         // the LF after the size line's CR
	chunkData           // inside a chunk's data
	chunkDataCR         // the CR after a chunk's data
	chunkDataLF         // the LF after it
	chunkTrailer        // after the last chunk: trailer lines until an empty one
	chunkDone           // the body ended; anything more is an error
)

// maxSSELine bounds one SSE line; the room's frames are under a KiB.
const maxSSELine = 1 << 20

// errBodyEnded is returned when bytes follow the last chunk.
var errBodyEnded = errors.New("bytes after the last chunk of the body")

// done reports whether the last chunk and its trailer have been read: the
// server ended the body on purpose.
func (p *chunkedSSE) done() bool { return p.state == chunkDone }

// feed parses b and calls emit for every complete line (without its line
// ending). The line passed to emit is only valid during the call.
func (p *chunkedSSE) feed(b []byte, emit func(line []byte)) error {
	for len(b) > 0 {
		switch p.state {
		case chunkSize:
			c := b[0]
			v, ok := hexVal(c)
			switch {
			case ok:
				if p.digits >= 15 {
					return fmt.Errorf("chunk size too long")
				}
				p.size = p.size<<4 | int64(v)
				p.digits++
			case p.digits == 0:
				return fmt.Errorf("bad chunk size byte %q", c)
			case c == ';' || c == ' ' || c == '\t':
				p.state = chunkExt
			case c == '\r':
				p.state = chunkSizeLF
			default:
				return fmt.Errorf("bad chunk size byte %q", c)
			}
			b = b[1:]
		case chunkExt:
			i := bytes.IndexByte(b, '\r')
			if i < 0 {
				return nil // the whole rest is extension
			}
			p.state = chunkSizeLF
			b = b[i+1:]
		case chunkSizeLF:
			if b[0] != '\n' {
				return fmt.Errorf("chunk size line not ended by CR LF")
			}
			b = b[1:]
			p.digits = 0
			if p.size == 0 {
				p.state = chunkTrailer
			} else {
				p.state = chunkData
			}
		case chunkData:
			n := min(int64(len(b)), p.size)
			if err := p.lines(b[:n], emit); err != nil {
				return err
			}
			b = b[n:]
			p.size -= n
			if p.size == 0 {
				p.state = chunkDataCR
			}
		case chunkDataCR:
			if b[0] != '\r' {
				return fmt.Errorf("chunk data not followed by CR LF")
			}
			b = b[1:]
			p.state = chunkDataLF
		case chunkDataLF:
			if b[0] != '\n' {
				return fmt.Errorf("chunk data not followed by CR LF")
			}
			b = b[1:]
			p.state = chunkSize
		case chunkTrailer:
			// Trailer lines, then the empty line that ends the body; digits
			// counts the bytes of the line in progress (a CR not counted).
			c := b[0]
			b = b[1:]
			switch {
			case c == '\n' && p.digits == 0:
				p.state = chunkDone
			case c == '\n':
				p.digits = 0
			case c != '\r':
				p.digits++
			}
		case chunkDone:
			return errBodyEnded
		}
	}
	return nil
}

// lines splits chunk data into SSE lines, carrying a line that does not
// end here over to the next call.
func (p *chunkedSSE) lines(b []byte, emit func([]byte)) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !p.skip {
				if len(p.partial)+len(b) > maxSSELine {
					return fmt.Errorf("an SSE line longer than %d bytes", maxSSELine)
				}
				if len(p.partial) == 0 && b[0] == ':' {
					p.skip = true // a comment: no need to keep it
				} else {
					p.partial = append(p.partial, b...)
				}
			}
			return nil
		}
		line := b[:i]
		if len(p.partial) > 0 {
			if len(p.partial)+len(line) > maxSSELine {
				return fmt.Errorf("an SSE line longer than %d bytes", maxSSELine)
			}
			p.partial = append(p.partial, line...)
			line = p.partial
		}
		skip := p.skip
		p.skip = false
		b = b[i+1:]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !skip && len(line) > 0 && line[0] != ':' {
			emit(line)
		}
		p.partial = p.partial[:0]
	}
	return nil
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
