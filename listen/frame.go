package listen

// Frame is one published change as the wire carries it, encoded once by the
// hub's Encoder however many streams it reaches. The hub never looks inside:
// what a change means and how it is spelled on the wire belong to the front
// door that serves the streams.
type Frame interface {
	// AppendTo appends the frame as one stream writes it. tag is that
	// stream's ServeOptions.Tag, bytes the door encoded once per stream (the
	// listen request id, say), or nil. It runs for every frame every stream
	// writes, on the stream's goroutine or on one of the hub's writers,
	// concurrently, so it must be a copy, not an encode.
	AppendTo(dst, tag []byte) []byte
}

// Encoder turns a published Message into its Frame. The broadcaster calls
// it once per message that has at least one subscriber, never once per
// subscriber, so the cost of encoding does not grow with the audience.
// ok=false means the change could not be encoded as published and f is a
// stand-in (counted in Stats.Malformed and logged); a nil f is not sent.
type Encoder func(m Message) (f Frame, ok bool)

// queued is a frame on its way to the streams it was offered to, shared by
// all of them, with the time it was queued: the lag rule measures from it.
type queued struct {
	Frame
	at int64 // Config.Now in Unix ns
}

// keepAlive is the SSE comment a quiet stream gets, so proxies keep it open
// and a dead peer shows up as a write error.
const keepAlive = ": keepalive\n\n"
