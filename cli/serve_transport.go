package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// transportCloseBound is how long ce waits for a plugin to close before it
// goes on without it.
const transportCloseBound = 15 * time.Second

// startTransport opens the --transport plugin and exposes the ingress
// listener (never the owner listener) through it, bounded by
// --transport-timeout and by an interrupt. It returns the hints new
// invitations carry — the exposed one first, loopback after it — the
// plugin's own listener when it hands its connections over for the room to
// serve (transport.ConnExposer; nil when it forwards them to the ingress),
// and a function that closes the plugin (safe to call more than once). On
// failure the plugin is closed and the error is transport_unavailable
// naming why.
func startTransport(ctx context.Context, env Env, log *slog.Logger, f serveFlags, prov transport.Provider,
	docPath, tmpDir string, ingress *net.TCPAddr) ([]room.Hint, net.Listener, func(), error) {
	name := prov.Name()
	fail := func(err error) ([]room.Hint, net.Listener, func(), error) {
		why := strings.TrimPrefix(err.Error(), transport.ErrUnavailable.Error()+": ")
		return nil, nil, nil, room.Errorf(room.KindTransportUnavailable,
			"transport %s could not expose the room, so it was not opened (the file and its sidecar are untouched): %s", name, why)
	}
	stateDir := ""
	if name != transport.LoopbackName {
		stateDir = serveStateDir(docPath, tmpDir, name)
		if err := makeStateDir(stateDir); err != nil {
			return fail(fmt.Errorf("its state directory: %v", err))
		}
	}
	base, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	tctx, cancel := context.WithTimeoutCause(base, f.transportTimeout,
		fmt.Errorf("it was not up within --transport-timeout (%s)", f.transportTimeout))
	defer cancel()
	stopWatch := watchInterrupt(env.Signals, interrupt)

	plug, err := openPlugin(tctx, prov, transportOptions(env, log, name, stateDir, roomName(docPath), false))
	if err != nil {
		stopWatch()
		return fail(err)
	}
	closeIt := sync.OnceFunc(func() {
		done := make(chan struct{})
		go func() {
			if err := plug.Close(); err != nil {
				log.Warn("closing the transport", "transport", name, "err", transport.Redact(err.Error()))
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(transportCloseBound):
			log.Warn("the transport did not close in time; going on without it", "transport", name, "waited", transportCloseBound)
		}
	})
	h, ln, err := exposeBounded(tctx, plug, ingress.String())
	if err == nil {
		h, err = checkExposed(name, h)
	}
	if interrupted := stopWatch(); interrupted && err == nil {
		err = fmt.Errorf("interrupted while it came up")
	}
	if err != nil {
		closeIt()
		return fail(err)
	}
	hints := []room.Hint{toRoomHint(h)}
	if h.Type != transport.LoopbackName {
		lh, err := transport.Loopback{}.Expose(ctx, ingress.String())
		if err != nil {
			closeIt()
			return fail(err)
		}
		hints = append(hints, toRoomHint(lh))
	}
	// The log names the transport, never its endpoint (the banner shows that).
	log.Info("transport ready", "transport", name, "mode", h.Mode, "encrypted", h.Encrypted, "served_by_the_room", ln != nil)
	return hints, ln, closeIt, nil
}

// watchInterrupt cancels with "interrupted" when a signal arrives while a
// transport comes up. The returned stop ends the watch and says whether it
// took a signal (which serve then treats as the interrupt it was).
func watchInterrupt(sig <-chan os.Signal, cancel context.CancelCauseFunc) (stop func() bool) {
	quit := make(chan struct{})
	got := make(chan bool, 1)
	go func() {
		select {
		case s := <-sig:
			cancel(fmt.Errorf("interrupted (%v)", s))
			got <- true
		case <-quit:
			got <- false
		}
	}()
	var once sync.Once
	var res bool
	return func() bool {
		once.Do(func() {
			close(quit)
			res = <-got
		})
		return res
	}
}
