package httpapi

import (
	"log/slog"
	"net/http"
	"time"
)

// Connection limits of both listeners. Streams have no server-wide write
// timeout: each listen stream bounds its own writes (listen.Config.MaxLag);
// every other response gets a write deadline of its own (Config.WriteTimeout,
// set per request by the bound middleware), and so does every request body
// (Config.BodyReadTimeout).
const (
	// ReadHeaderTimeout cuts off a client that sends its headers slowly.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes keep-alive connections nobody uses, once they have
	// shown a valid credential.
	IdleTimeout = 2 * time.Minute
	// UnauthenticatedIdleTimeout closes a connection that has never shown a
	// valid credential once it has waited this long for a request: such a
	// connection costs as much as a participant's and needs no secret to
	// open, so it must not hold its slot for IdleTimeout (see connPolicy).
	// It is ReadHeaderTimeout, the time a new connection already gets to
	// send its first request.
	UnauthenticatedIdleTimeout = ReadHeaderTimeout
	// DefaultBodyReadTimeout bounds reading one request body, counted from
	// the moment its headers are in, whether or not the handler reads it.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing one response that is not a stream,
	// so a client that never reads cannot hold the answer's memory.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConns is how many connections the ingress listener holds at
	// once: far above what 32 sessions with 4 streams each need, and far
	// below the open-file limit ce serve raises itself to.
	DefaultMaxConns = 4096
	// DefaultOwnerMaxConns is the owner listener's own cap: the page, the
	// operator's commands and their streams.
	DefaultOwnerMaxConns = 256
)

// NewHTTPServer is how ce serve runs each listener's handler: with the
// slow-client limits above, server errors logged as warnings, and every
// connection recorded for listen streams (listen.ConnContext) so a peer
// that stops reading is dropped within MaxLag rather than once megabytes of
// kernel buffer are full. Serve it on Server.OwnerListener or
// Server.IngressListener, which share the connections held at once
// (connPolicy); it follows each connection between idle and busy for them.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ConnContext:       connContext,
		ConnState:         connState,
		// net/http's own answer to "OPTIONS *" reads up to 4 KiB of body
		// with no deadline, before any handler; bound refuses it instead.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
