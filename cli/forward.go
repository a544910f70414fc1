package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// forward is `ce join --hold`: a listener on 127.0.0.1:0 whose every
// connection is carried to the room through the plugin, so an MCP client or
// a `ce` command on this machine reaches a room elsewhere at url.
type forward struct {
	ln     net.Listener
	url    string
	plug   transport.Plugin
	hint   transport.Hint
	dialTO time.Duration
	log    *slog.Logger
	failed chan error // the listener stopped by itself

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startForward(plug transport.Plugin, h transport.Hint, dialTimeout time.Duration, log *slog.Logger) (*forward, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, room.Errorf(room.KindInternal, "cannot open the local forward: %v", err)
	}
	f := &forward{ln: ln, url: "http://" + ln.Addr().String(), plug: plug, hint: h, dialTO: dialTimeout, log: log,
		failed: make(chan error, 1), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *forward) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if !closed {
				f.failed <- err
			}
			return
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			ctx, cancel := context.WithTimeout(context.Background(), f.dialTO)
			up, err := f.plug.Dial(ctx, f.hint)
			cancel()
			if err != nil {
				f.log.Warn("the forward could not reach the room", "transport", f.hint.Type, "err", transport.Redact(err.Error()))
				return
			}
			if !f.track(up) {
				up.Close()
				return
			}
			defer f.untrack(up)
			splice(c, up)
		}()
	}
}

// track registers a connection to close on Close; false once closed.
func (f *forward) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forward) untrack(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// splice copies both ways; when either side ends, both close.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// Close stops accepting, closes every carried connection and waits for
// their goroutines.
func (f *forward) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
