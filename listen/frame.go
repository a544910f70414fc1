package listen

import (
	"bytes"
	"encoding/json"
)

const (
	framePrefix = "data: "
	frameEnd    = "\n\n"
	// metaOpen starts the member that ties a frame to its listen request; the
	// spec requires it on every frame of a subscriptions/listen stream.
	metaOpen   = `"_meta":{"io.modelcontextprotocol/subscriptionId":`
	notifyHead = framePrefix + `{"jsonrpc":"2.0","method":`
	keepAlive  = ": keepalive\n\n"
)

// frame is one published message encoded once and shared by every subscriber
// it goes to. Only the _meta member differs between streams, so the encoding is
// kept split just inside the params object where each stream splices its own.
type frame struct {
	buf   []byte // data: {"jsonrpc":"2.0","method":M,"params":{ | members}}\n\n
	split int    // buf[:split] ends with the opening brace of params
	empty bool   // params has no members, so the spliced _meta needs no comma
	at    int64  // Config.Now in Unix ns when queued: the lag rule measures from here
}

// newFrame encodes a notification once. ok is false when params is neither
// empty nor a JSON object; the frame then carries an empty params object,
// because one malformed message must not break the framing of every stream it
// reaches.
func newFrame(method string, params json.RawMessage) (f *frame, ok bool) {
	m, _ := json.Marshal(method) // a string cannot fail; invalid UTF-8 becomes U+FFFD
	b := bytes.NewBuffer(make([]byte, 0, len(notifyHead)+len(m)+len(`,"params":`)+len(params)+len("}"+frameEnd)))
	b.WriteString(notifyHead)
	b.Write(m)
	b.WriteString(`,"params":`)
	p := b.Len()
	ok = true
	if len(bytes.TrimSpace(params)) == 0 {
		b.WriteString("{}")
	} else if err := json.Compact(b, params); err != nil || b.Bytes()[p] != '{' {
		// Compact leaves b untouched on error; a valid non-object must go too.
		b.Truncate(p)
		b.WriteString("{}")
		ok = false
	}
	b.WriteString("}" + frameEnd)
	buf := b.Bytes()
	return &frame{buf: buf, split: p + 1, empty: buf[p+1] == '}'}, ok
}

// appendTo appends the frame as one stream sees it. meta is that stream's
// _meta member from appendMeta, or nil for streams whose frames carry none.
func (f *frame) appendTo(dst, meta []byte) []byte {
	dst = append(dst, f.buf[:f.split]...)
	if meta != nil {
		dst = append(dst, meta...)
		if !f.empty {
			dst = append(dst, ',')
		}
	}
	return append(dst, f.buf[f.split:]...)
}

// appendMeta builds a stream's _meta member once, so that delivering a frame
// costs a copy rather than an encode. The id keeps its JSON type (a number
// stays a number); an id that is not JSON at all is sent as a JSON string so
// the frame stays parseable. An empty id means no _meta.
func appendMeta(dst []byte, id json.RawMessage) []byte {
	if len(bytes.TrimSpace(id)) == 0 {
		return nil
	}
	b := bytes.NewBuffer(dst)
	b.WriteString(metaOpen)
	if err := json.Compact(b, id); err != nil {
		s, _ := json.Marshal(string(id))
		b.Write(s)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// EncodeFrame exists so the handler can build the acknowledgement (and tests
// their expectations) byte-for-byte the way the hub builds every later frame:
// one SSE event holding one compact JSON-RPC notification. With a non-nil
// subscriptionID the _meta member is spliced in as the first member of params,
// where the spec requires it. params must not carry _meta itself; params that
// is not a JSON object is replaced by {} so the event stays well-formed.
func EncodeFrame(method string, params json.RawMessage, subscriptionID json.RawMessage) []byte {
	f, _ := newFrame(method, params)
	meta := appendMeta(nil, subscriptionID)
	return f.appendTo(make([]byte, 0, len(f.buf)+len(meta)+1), meta)
}

// EncodeData frames JSON the caller encoded itself, such as the listen
// request's final result, which is a response rather than a notification. The
// JSON is compacted so it fits on the single data: line the stream framing
// relies on; input that is not valid JSON has its line breaks replaced by
// spaces, which keeps the stream intact and leaves the bad event for the client
// to reject.
func EncodeData(v json.RawMessage) []byte {
	b := bytes.NewBuffer(make([]byte, 0, len(framePrefix)+len(v)+len(frameEnd)))
	b.WriteString(framePrefix)
	if err := json.Compact(b, v); err != nil {
		start := b.Len()
		b.Write(v)
		raw := b.Bytes()[start:]
		for i, c := range raw {
			if c == '\n' || c == '\r' {
				raw[i] = ' '
			}
		}
	}
	b.WriteString(frameEnd)
	return b.Bytes()
}
