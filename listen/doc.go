// Package listen fans committed room changes out to live subscribers. It knows
// nothing of SQL, of the room's records or of any wire protocol: it moves
// opaque changes from one publisher to many bounded per-subscriber queues,
// has them encoded once each by the Encoder the front door supplies, and
// writes the frames as server-sent events, dropping any subscriber that
// cannot keep up.
//
// Three kinds of goroutine touch a Hub. The room's writer calls Publish once
// per commit; Publish only appends to a queue, so the writer never waits for a
// subscriber. The hub's broadcaster drains that queue in commit order, encodes
// each message once (Config.Encode) and offers it to the subscribers of its topic with
// non-blocking sends; a full queue drops that subscriber. Each stream has one
// writer, which writes every frame already queued before one flush, under a
// write deadline: with Subscription.ServeDetached (HTTP/1.1 on a socket) a
// goroutine of the stream's own, which holds the connection after the
// handler has returned (net/http's handler goroutine, background reader and
// per-connection buffers gone; one epoll set per hub notices clients that
// close); with Subscription.Serve, or where a connection cannot be taken,
// the handler's goroutine itself.
//
// Who may see a change can differ from one subscriber of a topic to the
// next while its frame is encoded once for all: a stream may carry a
// Filter, a predicate over the published Message that the broadcaster asks
// before offering it the frame, so the rule stays the door's and the hub
// stays blind to what a message means. A stream opened with a credential
// the room does not track may carry an Until, after which it gets nothing
// and ends.
//
// A stream ends gracefully (Cancel, EndSession, Until, Close) with the caller's final
// frame, after everything published before the end; or it is dropped (queue
// full, lagging, write failed) without it, so the client knows it may have
// lost frames and re-reads the authority. Nothing is replayed to a new
// subscription.
package listen
