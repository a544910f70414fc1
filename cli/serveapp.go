package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/commonroom/ce/httpapi/present"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// serveApp is one `ce serve` of one file, held as an application with an
// Open and a Close (the shape of benbjohnson/wtf's Main): Open takes the
// room's pieces one by one and Close gives back whatever was taken, so a
// start that fails half-way and a stop after hours of serving leave the
// same state behind — the lock free, no credential file, no goroutine, and
// files not yet opened untouched. runServe keeps the terminal side: flags,
// banner and signals.
type serveApp struct {
	// Set by the caller before Open.
	env  Env
	f    serveFlags // already checked by checkServeFlags
	file string     // as the person typed it
	prov transport.Provider
	log  *slog.Logger

	// Taken by Open in this order; each is nil until taken.
	docPath            string
	notes              []string // warnings the banner repeats
	lock               *room.WriterLock
	tmpDir             string // --ephemeral: the sidecar's directory
	fileLimit          uint64 // the open-file limit in effect (0 unknown)
	ownerLn, ingressLn net.Listener
	metricsLn          net.Listener // --metrics-addr (nil: none)
	hints              []room.Hint  // the exposed way in first, loopback after it
	transportLn        net.Listener // the transport's own listener the ingress is served on too (nil: it forwards)
	closeTransport     func()
	transportStopped   atomic.Bool // the transport's own listener stopped being served
	hub                *listen.Hub
	local              *localRoom
	api                *httpapi.Server
	inv                room.InviteGrant // the banner's invitation
	archive            *room.Archive    // --archive, closed after the room
	servers            []*http.Server   // owner, ingress
	group              *errgroup.Group  // the two Serve loops
	done               <-chan struct{}  // closed once a Serve loop failed or ctx ended

	closeOnce sync.Once
	closeErr  error
}

// Open acquires the room in order: the document and its writer lock, the
// two listeners and the transport (before the sidecar, so a transport that
// fails leaves the room's files untouched), the hub and the actor, the
// started mark, the first invitation, the operator credential, and then
// serving. On any failure it gives back what it took through Close.
func (a *serveApp) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	for _, step := range []func(context.Context) error{a.openDocument, a.openListeners, a.openTransport, a.openRoom, a.start} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Done is closed when the app ends on its own (a listener failed) or the
// context given to Open ends; Close then says why.
func (a *serveApp) Done() <-chan struct{} { return a.done }

// Close gives back what Open took, in the shutdown order of DESIGN §6: stop
// accepting, end the live streams gracefully, let requests in flight finish
// (http.Server.Shutdown), close the transport, drain and stop the writer
// (its final commit is the stopped mark) and close the sidecar, then remove
// the credential file, the ephemeral directory and the lock. It is safe
// after a partial Open and more than once; it returns the error of a
// listener that failed while serving.
func (a *serveApp) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.close() })
	return a.closeErr
}

func (a *serveApp) close() error {
	if a.servers != nil {
		shutdown(a.servers, a.hub, a.log)
	}
	for _, ln := range []net.Listener{a.ownerLn, a.ingressLn, a.transportLn, a.metricsLn} {
		if ln != nil {
			ln.Close() // Shutdown closed them when they were served
		}
	}
	if a.hub != nil {
		a.hub.Close()
	}
	var err error
	if a.group != nil {
		err = a.group.Wait()
	}
	if a.closeTransport != nil {
		a.closeTransport()
	}
	if a.lock != nil {
		// Whatever credential is there is ours or stale: we hold the lock.
		// Once the room is open it is removed from the directory the room
		// holds, wherever that is now, never from a new one at the path.
		if a.local != nil {
			a.local.eng.RemoveBeside(ownerPath("")) // ownerPath of no name is the suffix
		} else {
			os.Remove(ownerPath(a.docPath))
		}
	}
	if a.local != nil {
		a.stopRoom()
	}
	if a.archive != nil {
		a.archive.Close() // after the room: its last prune turn may still append
	}
	if a.tmpDir != "" {
		os.RemoveAll(a.tmpDir)
	}
	a.lock.Release()
	return err
}

// stopRoom records the graceful stop and drains and closes the writer and
// the sidecar, bounded so a stuck writer cannot hold the exit forever.
func (a *serveApp) stopRoom() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := a.local
	actor.Do(ctx, l.room, "stopped", func(tx *room.Tx) (struct{}, error) { return struct{}{}, l.eng.MarkStopped(tx) })
	if err := l.Close(ctx); err != nil {
		a.log.Error("closing the room", "err", err)
	}
}

// openDocument finds the document (restoring it from its sidecar when it
// is missing), takes the writer lock, and makes the ephemeral directory.
func (a *serveApp) openDocument(ctx context.Context) error {
	if !a.f.ephemeral {
		if err := restoreMissingDocument(ctx, a.env, a.file); err != nil {
			return err
		}
	}
	docPath, err := room.ResolveDocPath(a.file)
	if err != nil {
		return err
	}
	// Decide at open whether a commit could keep the file's owner and group.
	if err := room.CheckDocOwner(docPath); err != nil {
		return err
	}
	// And whether the sidecar beside it is this user's to adopt, before
	// anything is taken: a refused room is left as it was.
	if !a.f.ephemeral {
		if err := room.CheckSidecarOwners(room.SidecarPath(docPath)); err != nil {
			return err
		}
	}
	if !a.f.ephemeral {
		if w := gitWarning(ctx, docPath); w != "" {
			a.notes = append(a.notes, w)
			if a.f.json { // the banner, which shows notes, is not printed
				a.log.Warn(w)
			}
		}
	}
	if n := room.DocLinks(docPath); n > 1 {
		a.notes = append(a.notes, fmt.Sprintf("%s has %d hard links; a commit replaces the file, so the other names keep the old text", a.file, n))
		a.log.Warn("the document has other hard links; a commit replaces the file, so the other names keep the old text", "links", n)
	}
	lock, err := room.AcquireWriterLock(docPath)
	if err != nil {
		if errors.Is(err, room.ErrLocked) {
			msg := err.Error()
			if of, ferr := readOwnerFile(docPath); ferr == nil {
				msg = describeServing(of)
			}
			return room.Errorf(room.KindRoomBusy, "%s is already being served: %s", a.file, msg)
		}
		return err
	}
	a.docPath, a.lock = docPath, lock
	// A credential left by a killed process is never trusted: we hold the
	// lock, so whatever is there is stale.
	os.Remove(ownerPath(docPath))
	if a.f.ephemeral {
		dir, err := os.MkdirTemp("", "commonroom-*")
		if err != nil {
			return room.Internal(err)
		}
		a.tmpDir = dir
	}
	return nil
}

// openListeners binds the owner and the ingress listeners, after lifting
// the open-file limit their connection caps must fit under.
func (a *serveApp) openListeners(context.Context) error {
	a.fileLimit = raiseFileLimit(a.log)
	var err error
	if a.ownerLn, err = listenOn(a.f.addr); err != nil {
		return err
	}
	if a.ingressLn, err = listenOn(a.f.ingressAddr); err != nil {
		return err
	}
	if a.f.metricsAddr != "" {
		a.metricsLn, err = listenOn(a.f.metricsAddr)
	}
	return err
}

// listenOn binds addr (already checked to be loopback); nil on failure, so
// Close finds nothing to close.
func listenOn(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "cannot listen on %s: %v", addr, err)
	}
	return ln, nil
}

// openTransport exposes the ingress listener through --transport.
func (a *serveApp) openTransport(ctx context.Context) error {
	hints, ln, closeIt, err := startTransport(ctx, a.env, a.log, a.f, a.prov, a.docPath, a.tmpDir, a.ingressLn.Addr().(*net.TCPAddr))
	if err != nil {
		return err
	}
	a.hints, a.transportLn, a.closeTransport = hints, ln, closeIt
	return nil
}

// openRoom starts the hub and opens the sidecar and the actor (with the
// file watcher), then marks the room started and makes the banner's
// invitation.
func (a *serveApp) openRoom(ctx context.Context) error {
	f := a.f
	a.hub = listen.NewHub(listen.Config{QueueLen: f.queueLen, MaxLag: f.maxLag, MaxStreamsPerSession: f.streams, Logger: a.log, Encode: present.EncodeChange})
	host := f.name
	if host == "" {
		host = hostName(a.env)
	}
	dbPath := ""
	if a.tmpDir != "" {
		dbPath = filepath.Join(a.tmpDir, filepath.Base(a.docPath)+".commonroom.db")
	}
	l, err := openLocalWith(ctx, a.docPath, dbPath, host, a.hub, a.log, f.limits(), f.maxBatch, actor.WatchConfig{Enabled: true},
		withWALAutocheckpoint(f.walCkpt), f.retain.withRetention(&a.archive))
	if err != nil {
		return err
	}
	a.local = l
	l.eng.SetHints(a.hints)
	if _, err := actor.Do(ctx, l.room, "started", func(tx *room.Tx) (struct{}, error) {
		return struct{}{}, l.eng.MarkStarted(tx)
	}); err != nil {
		return err
	}
	// The first invitation is ce invite's row with every default.
	return (&hostDoor{local: l, doc: a.docPath}).call(ctx, "invite", room.InviteInput{}, &a.inv)
}

// start writes the operator credential and runs the two Serve loops in an
// errgroup, so a listener that dies ends the app with its error.
func (a *serveApp) start(ctx context.Context) error {
	f := a.f
	opToken := newOperatorToken()
	maxConns, ownerMaxConns := connCaps(a.log, a.fileLimit, f)
	a.api = httpapi.New(httpapi.Config{Room: a.local.room, Hub: a.hub, Logger: a.log, OperatorToken: opToken, Version: version(),
		BodyReadTimeout: f.bodyTimeout, WriteTimeout: f.writeTimeout, MaxConns: maxConns, OwnerMaxConns: ownerMaxConns,
		MaxConnsPerPeer: f.maxConnsPerPeer, TransportUp: a.transportUp()})
	if err := writeOwnerFile(a.docPath, ownerFile{PID: os.Getpid(), WorkspaceID: a.local.eng.WorkspaceID,
		OwnerURL: a.ownerURL(), IngressURL: a.ingressURL(), OperatorToken: opToken, Transport: newOwnerTransport(a.hints[0])}); err != nil {
		return room.Errorf(room.KindInternal, "cannot write the operator credential %s: %v", ownerPath(a.docPath), err)
	}
	g, gctx := errgroup.WithContext(ctx)
	a.group, a.done = g, gctx.Done()
	for _, s := range []struct {
		h  http.Handler
		ln net.Listener
	}{{a.api.OwnerHandler(), a.api.OwnerListener(a.ownerLn)}, {a.api.IngressHandler(), a.api.IngressListener(a.ingressLn)}} {
		srv := httpapi.NewHTTPServer(s.h, a.log)
		a.servers = append(a.servers, srv)
		g.Go(func() error {
			if err := srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				return room.Errorf(room.KindInternal, "a listener failed: %v", err)
			}
			return nil
		})
	}
	if a.metricsLn != nil {
		srv, ln := httpapi.NewHTTPServer(a.api.MetricsHandler(), a.log), a.api.MetricsListener(a.metricsLn)
		a.servers = append(a.servers, srv)
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return room.Errorf(room.KindInternal, "the metrics listener failed: %v", err)
			}
			return nil
		})
	}
	if a.transportLn != nil {
		// The transport hands its connections over: the ingress's server
		// serves them too, under the same connection policy, which sees
		// each connection's peer. Its listener stopping (the network node
		// gone) leaves the room on loopback, as a forward that stops does.
		srv, ln := a.servers[1], a.api.IngressListener(a.transportLn)
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				a.transportStopped.Store(true)
				a.log.Warn("the transport's listener stopped; the room goes on without it", "err", transport.Redact(err.Error()))
			}
			return nil
		})
	}
	return nil
}

func (a *serveApp) ownerURL() string   { return "http://" + a.ownerLn.Addr().String() }
func (a *serveApp) ingressURL() string { return "http://" + a.ingressLn.Addr().String() }

// metricsURL is the metrics listener's base URL, "" without --metrics-addr.
func (a *serveApp) metricsURL() string {
	if a.metricsLn == nil {
		return ""
	}
	return "http://" + a.metricsLn.Addr().String()
}

// transportUp is /readyz's transport check: a transport that hands its
// connections over is down once the room stopped serving its listener (its
// network node is gone); loopback, and a transport that forwards to the
// ingress, are up while the room serves (a forwarder tells nothing more).
func (a *serveApp) transportUp() func() error {
	if a.transportLn == nil {
		return nil
	}
	return func() error {
		if a.transportStopped.Load() {
			return errors.New("the transport's listener stopped")
		}
		return nil
	}
}
