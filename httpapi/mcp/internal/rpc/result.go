package rpc

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
)

// A successful tools/call result carries the tool's answer twice: as JSON
// text (content[0].text, HTML-escaped as json.Marshal writes it) and as the
// value itself (structuredContent). Encoding the answer by reflection twice
// was the largest single cost of handoff_get after the SQL, so the answer is
// encoded once and both copies are made from those bytes, and the whole
// result is written as bytes rather than as a map for encoding/json to sort
// and walk. The bytes are exactly what encoding the result map sent before
// (TestToolResultBytesAreTheMapEncoding holds the two side by side).

// Raw is a JSON-RPC result already encoded: WriteResult sends its
// bytes as they are.
type Raw []byte

// encBuf is a reusable encoding buffer.
type encBuf struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encBufs = sync.Pool{New: func() any {
	b := &encBuf{}
	b.enc = json.NewEncoder(&b.buf)
	b.enc.SetEscapeHTML(false)
	return b
}}

func getEncBuf() *encBuf { b := encBufs.Get().(*encBuf); b.buf.Reset(); return b }

// putEncBuf returns b to the pool unless it grew large (a large answer's
// buffer is left to the collector rather than held).
func putEncBuf(b *encBuf) {
	if b.buf.Cap() <= 64<<10 {
		encBufs.Put(b)
	}
}

// EncodeNoHTML appends v's JSON (not HTML-escaped, no trailing newline) to
// dst.
func EncodeNoHTML(dst []byte, v any) ([]byte, error) {
	b := getEncBuf()
	defer putEncBuf(b)
	if err := b.enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(b.buf.Bytes(), []byte("\n"))...), nil
}

// htmlUnsafe reports whether b holds a byte json.Marshal would escape where
// an encoder with SetEscapeHTML(false) does not: <, >, & and the first byte
// of U+2028/U+2029 (left raw inside a json.RawMessage). Byte by byte:
// bytes.ContainsAny would read "\xe2" as a rune.
func htmlUnsafe(b []byte) bool {
	for _, c := range b {
		switch c {
		case '<', '>', '&', 0xe2:
			return true
		}
	}
	return false
}

// ToolResult is the result of a tools/call that succeeded with out: what
// the door's complete made of {content: [{type: text, text: json.Marshal(out)}],
// structuredContent: out (or {result: out} when out is not an object),
// isError: false}, with meta (the door's _meta, encoded) first, encoded the
// way WriteResult encodes a result. The answer is encoded once into a
// pooled buffer and both copies are made from it.
func ToolResult(meta []byte, out any) (Raw, error) {
	res, err := appendToolResult(nil, meta, out)
	return Raw(res), err
}

// appendToolResult appends ToolResult's bytes to dst.
func appendToolResult(dst, meta []byte, out any) ([]byte, error) {
	b := getEncBuf()
	defer putEncBuf(b)
	if err := b.enc.Encode(out); err != nil {
		return nil, err
	}
	value := bytes.TrimSuffix(b.buf.Bytes(), []byte("\n"))
	// json.Marshal(out) is the same encoding with <, >, & (and U+2028/2029
	// in raw messages) escaped: json.HTMLEscape of it.
	text := value
	if htmlUnsafe(value) {
		var esc bytes.Buffer
		esc.Grow(len(value) + 64)
		json.HTMLEscape(&esc, value)
		text = esc.Bytes()
	}
	res := slices.Grow(dst, 2*len(value)+len(value)/4+len(meta)+160)
	res = append(res, `{"_meta":`...)
	res = append(res, meta...)
	res = append(res, `,"content":[{"text":`...)
	res, err := EncodeNoHTML(res, string(text))
	if err != nil {
		return nil, err
	}
	res = append(res, `,"type":"text"}],"isError":false,"resultType":"complete","structuredContent":`...)
	if len(value) > 0 && value[0] != '{' {
		res = append(res, `{"result":`...)
		res = append(res, value...)
		res = append(res, '}')
	} else {
		res = append(res, value...)
	}
	return append(res, '}'), nil
}

// writeRawResult writes {"jsonrpc":"2.0","id":id,"result":raw} and a newline,
// as WriteResult's encoder would. ok is false when id is not JSON: the
// caller then goes the encoder's way, which fails the same way it always did.
func writeRawResult(w interface{ Write([]byte) (int, error) }, id json.RawMessage, raw Raw) (ok bool, err error) {
	b := getEncBuf()
	defer putEncBuf(b)
	out, ok := appendResultHead(b.buf.AvailableBuffer(), id)
	if !ok {
		return false, nil
	}
	out = append(append(out, raw...), "}\n"...)
	b.buf.Write(out) // the pooled buffer keeps the capacity for the next answer
	_, err = w.Write(b.buf.Bytes())
	return true, err
}

// appendResultHead appends what precedes a result in a JSON-RPC response,
// {"jsonrpc":"2.0","id":id,"result": with id compacted (and left out when
// empty), as WriteResult's encoder writes it; ok is false when id is not
// JSON.
func appendResultHead(dst []byte, id json.RawMessage) ([]byte, bool) {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if len(id) > 0 {
		var ok bool
		if dst, ok = appendCompact(append(dst, `,"id":`...), id); !ok {
			return dst, false
		}
	}
	return append(dst, `,"result":`...), true
}

// MaxPooledFrame bounds the frames a frame pool keeps: a large answer's
// buffer is left to the collector rather than held for the next request.
const MaxPooledFrame = 64 << 10

// Frame is a whole JSON-RPC response, already encoded into a buffer
// of its door's frame pool: WriteResult sends it in one write and gives
// the buffer back. A write's tool result (never kept: no memo) is encoded
// straight into it, instead of into a result of its own that
// writeRawResult then copied into a pooled buffer.
type Frame struct {
	b    []byte
	pool *sync.Pool
}

// FramePool keeps the buffers of answered tool results (Frame). The zero
// value is ready; it must not be copied after first use.
type FramePool struct {
	pool sync.Pool
}

// get is an empty frame from p.
func (p *FramePool) get() *Frame {
	if f, ok := p.pool.Get().(*Frame); ok {
		f.b = f.b[:0]
		return f
	}
	return &Frame{b: make([]byte, 0, 4096), pool: &p.pool}
}

// release gives f back to its pool, unless it grew past MaxPooledFrame.
// f must not be used after.
func (f *Frame) release() {
	if cap(f.b) <= MaxPooledFrame {
		f.pool.Put(f)
	}
}

// ToolResult is writeRawResult(w, id, ToolResult(meta, out)) encoded into
// a frame of p: the same bytes. ok is false when id is not JSON (the caller
// goes the way that fails as it always did); err is ToolResult's.
func (p *FramePool) ToolResult(id json.RawMessage, meta []byte, out any) (f *Frame, ok bool, err error) {
	f = p.get()
	if f.b, ok = appendResultHead(f.b, id); !ok {
		f.release()
		return nil, false, nil
	}
	if f.b, err = appendToolResult(f.b, meta, out); err != nil {
		f.release()
		return nil, true, err
	}
	f.b = append(f.b, "}\n"...)
	return f, true, nil
}

// appendCompact appends json.Compact of raw to dst; ok is false when raw is
// not JSON. An id is almost always a plain number or string with no space,
// which is appended as it is.
func appendCompact(dst []byte, raw json.RawMessage) ([]byte, bool) {
	b := bytes.NewBuffer(dst)
	if json.Compact(b, raw) != nil {
		return dst, false
	}
	return b.Bytes(), true
}
