package roomtest

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Doc is the document every harness starts from unless told otherwise: a
// title section and two more, so section-scoped cases have neighbours.
const Doc = "# Idea\n\nhello world\n\n## Goals\n\nship it\nsoon\n\n## Plan\n\nstep one\nstep two\nstep three\n"

// OperatorToken is the operator credential the harness configures. It is a
// test value; it appears in no log the kit writes.
const OperatorToken = "op_test_7f3c1a9e5b2d4c6e8a0f1b3d5e7a9c1e"

// Epoch is where the fake clock starts, so recorded answers stay stable.
var Epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// LogBuffer collects log output written from many goroutines, for tests
// that check what was (and was not) logged.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Door is one front-door listener as the caller wires it: the server (with
// ce serve's own configuration) and the listener it serves, possibly
// wrapped (connection caps).
type Door struct {
	Server   *http.Server
	Listener net.Listener
}

// Wire builds the front door for a room the harness has opened. It is
// called on every start (Restart too); ownerLn and ingressLn are fresh
// listeners on 127.0.0.1:0.
type Wire func(h *Harness, ownerLn, ingressLn net.Listener) (owner, ingress Door)

// Options chooses what Open changes from the default harness. Restart keeps
// them.
type Options struct {
	// Content is the document's text; "" is Doc.
	Content string
	// Wire is required: the kit imports no door.
	Wire Wire
	// Limits adjusts room.Defaults().
	Limits func(*room.Limits)
	// Hub is the hub's configuration; Logger and Now are filled in when nil.
	// Encode must be set by the caller (the door owns the encoding).
	Hub listen.Config
	// Publisher, when set, stands between the room's writer and the hub
	// (a test that needs to hold a batch); it gets the new hub each start.
	Publisher func(hub *listen.Hub) actor.Publisher
	// Actor adjusts the room actor's configuration after the kit filled it in.
	Actor func(*actor.Config)
	// Opened is called after each start, with everything open and served.
	Opened func(h *Harness)
	// InMemory puts the room's files on tmpfs (/dev/shm) when there is one,
	// for tests that push megabytes through the sidecar: its commits fsync,
	// and on a disk that, not the code under test, would dominate.
	InMemory bool
}

// Harness is one room served over HTTP. Its fields are the real parts, for
// tests that need to look underneath the doors.
type Harness struct {
	T       testing.TB
	Dir     string
	Doc     string // the Markdown file
	Clock   *room.ManualClock
	Logs    *LogBuffer
	Log     *slog.Logger
	OpToken string

	Eng     *room.Engine
	Store   *room.Store
	Hub     *listen.Hub
	Room    *actor.Room
	Owner   *httptest.Server
	Ingress *httptest.Server

	client  *http.Client
	opts    Options
	mu      sync.Mutex
	errs    []string // every error body seen (status >= 400)
	running bool
}

// Open opens a room around a fresh file and serves it; t.Cleanup closes
// everything.
func Open(t testing.TB, o Options) *Harness {
	t.Helper()
	if o.Wire == nil {
		t.Fatal("roomtest.Open: Options.Wire is required (apitest.New wires ce serve's front door)")
	}
	content := o.Content
	if content == "" {
		content = Doc
	}
	dir := tempDir(t, o.InMemory)
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &LogBuffer{}
	h := &Harness{
		T: t, Dir: dir, Doc: doc, Clock: room.NewManualClock(Epoch), Logs: logs,
		Log:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OpToken: OperatorToken,
		client: &http.Client{
			Timeout:       30 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		opts: o,
	}
	h.start()
	t.Cleanup(func() {
		h.Stop()
		h.client.CloseIdleConnections()
	})
	return h
}

// HTTP is the harness's client: no redirects followed, no compression.
func (h *Harness) HTTP() *http.Client { return h.client }

// Listener is a TCP listener on 127.0.0.1:0.
func Listener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func (h *Harness) start() {
	t := h.T
	t.Helper()
	ctx := context.Background()
	o := h.opts
	limits := room.Defaults()
	if o.Limits != nil {
		o.Limits(&limits)
	}
	eng, err := room.NewEngine(h.Doc, limits)
	if err != nil {
		t.Fatal(err)
	}
	eng.Clock = h.Clock.Now
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.Hub
	if cfg.Logger == nil {
		cfg.Logger = h.Log
	}
	if cfg.Now == nil {
		cfg.Now = h.Clock.Now
	}
	hub := listen.NewHub(cfg)
	var pub actor.Publisher = hub
	if o.Publisher != nil {
		pub = o.Publisher(hub)
	}
	acfg := actor.Config{Engine: eng, Store: st, Publisher: pub, Logger: h.Log, HostName: "host"}
	if o.Actor != nil {
		o.Actor(&acfg)
	}
	r, err := actor.Open(ctx, acfg)
	if err != nil {
		hub.Close()
		st.Close()
		t.Fatal(err)
	}
	h.Eng, h.Store, h.Hub, h.Room = eng, st, hub, r
	ownerLn, ingressLn := Listener(t), Listener(t)
	eng.SetHints([]room.Hint{{Type: "loopback", Address: "127.0.0.1", Port: ingressLn.Addr().(*net.TCPAddr).Port, Mode: "local"}})
	owner, ingress := o.Wire(h, ownerLn, ingressLn)
	serve := func(d Door) *httptest.Server {
		s := httptest.NewUnstartedServer(d.Server.Handler)
		s.Listener.Close()
		s.Listener = d.Listener
		s.Config = d.Server
		s.Start()
		return s
	}
	h.Owner, h.Ingress = serve(owner), serve(ingress)
	h.running = true
	if o.Opened != nil {
		o.Opened(h)
	}
}

// Stop closes the listeners (waiting for requests in flight), the hub, the
// actor and the store. It is idempotent; Cleanup calls it.
func (h *Harness) Stop() {
	if !h.running {
		return
	}
	h.running = false
	h.client.CloseIdleConnections()
	h.Owner.Close()
	h.Ingress.Close()
	h.Hub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Room.Close(ctx); err != nil {
		h.T.Errorf("closing the room: %v", err)
	}
	if err := h.Store.Close(); err != nil {
		h.T.Errorf("closing the store: %v", err)
	}
}

// Restart closes everything and opens the same files again (new listeners,
// new engine and actor, same clock, logs and operator token): what a
// restarted ce serve sees.
func (h *Harness) Restart() {
	h.T.Helper()
	h.Stop()
	h.start()
}

// OwnerURL is path on the owner listener (the operator's, loopback only).
func (h *Harness) OwnerURL(path string) string { return h.Owner.URL + path }

// IngressURL is path on the ingress listener (where participants come in).
func (h *Harness) IngressURL(path string) string { return h.Ingress.URL + path }

// Sweep applies the time-based rules now, as the sweeper would.
func (h *Harness) Sweep() {
	h.T.Helper()
	if err := h.Room.Sweep(context.Background()); err != nil {
		h.T.Fatalf("sweep: %v", err)
	}
}

// tempDir is t.TempDir(), on /dev/shm when asked and available.
func tempDir(t testing.TB, inMemory bool) string {
	t.Helper()
	if inMemory {
		if dir, err := os.MkdirTemp("/dev/shm", "ce-roomtest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
