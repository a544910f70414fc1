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
//
// # Expected subscriber behavior
//
// A subscriber must read its stream about as fast as the room changes. The
// hub never waits for one: the room's writer must not, and one slow reader
// must not delay the others. A subscriber that falls behind is dropped,
// which is the contract, not a fault: its stream ends without the final
// frame and the client re-reads the authority, then listens again. Every
// drop goes through one function, Hub.drop (end.go), which ends the
// subscription with its reason, counts it, logs one Warn (session ref and
// reason), and, when the broadcaster rather than the stream's own writer
// noticed, fails a write the stream may be blocked in. There are four
// triggers, each with its reason and its counter in Stats:
//
//   - Queue full: the broadcaster offers a frame to a stream whose queue
//     already holds Config.QueueLen frames (SubscribeRequest.QueueLen, when
//     set). Hub.offer (hub.go) reports it and Hub.deliver drops the stream
//     after the run: EndQueueFull, counted in DroppedQueueFull.
//   - Lag in the queue: the stream's writer wakes to frames whose oldest
//     was queued more than Config.MaxLag ago (on Config.Now's clock), in
//     streamLoop.onWake (loop.go): EndLagging, counted in DroppedSlow.
//   - Stalled peer: the socket probe, sampled every Config.ProbeEvery while
//     our bytes wait in the socket, sees the peer acknowledge nothing for
//     MaxLag, in streamLoop.onTimer (loop.go; the rule is stallWatch in
//     sockprobe.go, the sample internal/sock's Probe). It needs ConnContext
//     and Linux: EndLagging, counted in DroppedSlow.
//   - Failed write: a write or flush fails or misses its deadline (MaxLag,
//     renewed when less than half is left): the first frame (Serve,
//     ServeDetached), a burst or a keep-alive (loop.go). EndWriteFailed,
//     counted in DroppedSlow.
//
// Stats.Dropped is DroppedQueueFull plus DroppedSlow. The first end wins: a
// stream already ended is not dropped again, and a graceful end whose final
// frame cannot be written returns EndWriteFailed without counting a drop.
// Not drops: a client that goes away (EndClientGone: the request's context,
// or the close watcher) and a handler that abandons its stream
// (EndUnsubscribed, Subscription.Close), both counted in Disconnected; the
// graceful ends are counted in Ended.
//
// # How a frame reaches a socket
//
// By one of three roads, under the same rules (queue bound, time bound,
// probe, deadlines, keep-alives, final frame after everything):
//
//   - A pool writer's fast write (fastwrite.go): for a detached stream on a
//     plain TCP socket with nothing waiting, the broadcaster or one of its
//     writers makes one non-blocking write(2) of the stream's frames of a
//     run. What the kernel does not take is left to the stream's goroutine,
//     which writes it first (socketGate). Config.NoFastWrite turns this road
//     off, to bisect a fault or a figure.
//   - The detached stream's own goroutine (detach.go, loop.go): queued
//     frames, leftovers, keep-alives and the final frame, as HTTP/1.1 chunks
//     written straight to the connection taken from net/http.
//   - In place (Serve, or ServeDetached where it cannot detach): the
//     handler's goroutine writes through net/http's ResponseWriter.
package listen
