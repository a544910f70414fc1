package present

import (
	"bytes"
	"encoding/json"
)

const (
	framePrefix = "data: "
	frameEnd    = "\n\n"
	// subscriptionIDMember is the _meta member that ties a frame to its
	// listen request; the spec requires it on every frame of a
	// subscriptions/listen stream.
	subscriptionIDMember = `"` + SubscriptionIDKey + `":`
	notifyHead           = framePrefix + `{"jsonrpc":"2.0","method":`
)

// rpcFrame is one published change encoded once as a JSON-RPC notification
// and shared by every stream it goes to (it is the hub's listen.Frame). Only
// the _meta member differs between streams, so the encoding is kept split
// just inside the params object where each stream splices its own.
type rpcFrame struct {
	buf   []byte // data: {"jsonrpc":"2.0","method":M,"params":{ | members}}\n\n
	split int    // buf[:split] ends with the opening brace of params, or of params._meta when inMeta
	empty bool   // nothing follows the split brace, so the spliced member needs no comma
	// inMeta: params carries its own _meta object (a task's handoff id), so
	// the subscription id goes inside it rather than in a second _meta.
	inMeta bool
}

// newFrame encodes a notification once. ok is false when params is neither
// empty nor a JSON object; the frame then carries an empty params object,
// because one malformed message must not break the framing of every stream it
// reaches.
func newFrame(method string, params json.RawMessage) (f *rpcFrame, ok bool) {
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
	if ok && bytes.Contains(b.Bytes()[p:], []byte(`"_meta"`)) {
		if f := metaFirst(b.Bytes()[:p], b.Bytes()[p:]); f != nil {
			return f, ok
		}
	}
	b.WriteString("}" + frameEnd)
	buf := b.Bytes()
	return &rpcFrame{buf: buf, split: p + 1, empty: buf[p+1] == '}'}, ok
}

// metaFirst re-encodes params whose top level has a _meta object so that
// _meta comes first, and splits the frame just inside it. head is the frame
// up to params; params is its compact JSON object. It returns nil when _meta
// is absent at the top level. A _meta that is not an object is dropped: the
// spec makes _meta an object, and a frame must never carry the key twice.
func metaFirst(head, params []byte) *rpcFrame {
	var members map[string]json.RawMessage
	if json.Unmarshal(params, &members) != nil {
		return nil
	}
	meta, ok := members["_meta"]
	if !ok {
		return nil
	}
	if len(meta) < 2 || meta[0] != '{' {
		meta = json.RawMessage(`{}`)
	}
	delete(members, "_meta")
	rest, err := json.Marshal(members) // sorted keys: stable frames
	if err != nil {
		return nil
	}
	b := bytes.NewBuffer(make([]byte, 0, len(head)+len(params)+16))
	b.Write(head)
	b.WriteString(`{"_meta":{`)
	split := b.Len()
	inner := bytes.TrimSpace(meta[1 : len(meta)-1])
	b.Write(inner)
	b.WriteByte('}')
	if len(rest) > 2 {
		b.WriteByte(',')
		b.Write(rest[1 : len(rest)-1])
	}
	b.WriteString("}}" + frameEnd)
	return &rpcFrame{buf: b.Bytes(), split: split, empty: len(inner) == 0, inMeta: true}
}

// AppendTo appends the frame as one stream sees it. meta is that stream's
// subscription-id member from appendMeta (its listen.ServeOptions.Tag), or
// nil for streams whose frames carry none.
func (f *rpcFrame) AppendTo(dst, meta []byte) []byte {
	dst = append(dst, f.buf[:f.split]...)
	if meta != nil {
		if !f.inMeta {
			dst = append(dst, `"_meta":{`...)
		}
		dst = append(dst, meta...)
		if !f.inMeta {
			dst = append(dst, '}')
		}
		if !f.empty {
			dst = append(dst, ',')
		}
	}
	return append(dst, f.buf[f.split:]...)
}

// appendMeta builds a stream's subscription-id member once (the inside of
// _meta), so that delivering a frame costs a copy rather than an encode. The id keeps its JSON type (a number
// stays a number); an id that is not JSON at all is sent as a JSON string so
// the frame stays parseable. An empty id means no _meta.
func appendMeta(dst []byte, id json.RawMessage) []byte {
	if len(bytes.TrimSpace(id)) == 0 {
		return nil
	}
	b := bytes.NewBuffer(dst)
	b.WriteString(subscriptionIDMember)
	if err := json.Compact(b, id); err != nil {
		s, _ := json.Marshal(string(id))
		b.Write(s)
	}
	return b.Bytes()
}

// EncodeFrame exists so the handler can build the acknowledgement (and tests
// their expectations) byte-for-byte the way the hub builds every later frame:
// one SSE event holding one compact JSON-RPC notification. With a non-nil
// subscriptionID the _meta member is spliced in as the first member of params,
// where the spec requires it; when params carries its own _meta object the id
// joins that object instead. params that is not a JSON object is replaced by
// {} so the event stays well-formed.
func EncodeFrame(method string, params json.RawMessage, subscriptionID json.RawMessage) []byte {
	f, _ := newFrame(method, params)
	meta := appendMeta(nil, subscriptionID)
	return f.AppendTo(make([]byte, 0, len(f.buf)+len(meta)+1), meta)
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
