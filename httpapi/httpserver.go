package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/commonroom/ce/listen"
)

// Connection limits of both listeners. Streams have no server-wide write
// timeout: each listen stream bounds its own writes (listen.Config.MaxLag).
const (
	// ReadHeaderTimeout cuts off a client that sends its headers slowly.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes keep-alive connections nobody uses.
	IdleTimeout = 2 * time.Minute
)

// NewHTTPServer is how ce serve runs each listener's handler: with the
// slow-client limits above, server errors logged as warnings, and every
// connection recorded for listen streams (listen.ConnContext) so a peer
// that stops reading is dropped within MaxLag rather than once megabytes of
// kernel buffer are full.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ConnContext:       listen.ConnContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
