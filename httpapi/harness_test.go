package httpapi

// The HTTP test harness: the shared test kit (internal/roomtest: a real
// room on a real SQLite file in t.TempDir(), both front-door listeners on
// 127.0.0.1:0, parties, the nothing-changed check, scenario tables) wired to
// this package's front door, under the names this package's tests have
// always used. The kit cannot import httpapi (this package's white-box
// tests import the kit), so the wiring — New, NewHTTPServer, the MCP
// encoder — is here; black-box tests elsewhere get it from
// internal/roomtest/apitest.
//
// The vocabulary: newHarness (with harnessOpts) opens a room; h.join admits
// a participant as a party (its session, its MCP client and its
// Tasks-extension client); h.do sends plain HTTP and answers an apiResp; a
// party's mcpClient answers an mcpResp (client_test.go); streams are read
// frame by frame with the kit's reader (named in stream_test.go).

import (
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/present"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// harnessDoc is the document every harness starts from unless told otherwise.
const harnessDoc = roomtest.Doc

// harnessOperatorToken is the operator credential the harness configures.
const harnessOperatorToken = roomtest.OperatorToken

// fakeClock is the room's injectable clock; safe for concurrent use.
type fakeClock = room.ManualClock

func newFakeClock() *fakeClock { return room.NewManualClock(roomtest.Epoch) }

// lockedBuffer collects log output written from many goroutines.
type lockedBuffer = roomtest.LogBuffer

// roomHarness is one room served over HTTP: the kit's harness (its fields —
// Dir, Doc, Clock, Logs, Log, OpToken, Eng, Store, Hub, Room, Owner, Ingress
// — read through) and this package's Server in front of it.
type roomHarness struct {
	*roomtest.Harness
	t      testing.TB
	API    *Server
	client *http.Client
}

// newHarness opens a room around a fresh file holding content (harnessDoc
// when empty) and serves it; everything is closed by t.Cleanup. An options
// value (at most one) chooses the room's limits, the hub's configuration, a
// publication gate or tmpfs; Restart keeps them.
func newHarness(t testing.TB, content string, opts ...harnessOpts) *roomHarness {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("newHarness takes at most one harnessOpts, got %d", len(opts))
	}
	var o harnessOpts
	if len(opts) == 1 {
		o = opts[0]
	}
	h := &roomHarness{t: t}
	ko := roomtest.Options{Content: content, Limits: o.Limits, Hub: o.Hub, Actor: o.Actor, InMemory: o.InMemory}
	if ko.Hub.Encode == nil {
		ko.Hub.Encode = present.EncodeChange // the hub's encoder, as ce serve has it
	}
	if g := o.Gate; g != nil {
		ko.Publisher = func(hub *listen.Hub) actor.Publisher {
			g.hub, g.entered, g.release = hub, make(chan bool, 1), make(chan struct{})
			return g
		}
		ko.Opened = func(k *roomtest.Harness) {
			g.mu.Lock()
			g.room = k.Room
			g.mu.Unlock()
		}
	}
	ko.Wire = func(k *roomtest.Harness, ownerLn, ingressLn net.Listener) (owner, ingress roomtest.Door) {
		cfg := Config{Room: k.Room, Hub: k.Hub, Logger: k.Log, OperatorToken: k.OpToken, Version: "test"}
		if o.Server != nil {
			o.Server(&cfg)
		}
		h.API = New(cfg)
		owner = roomtest.Door{Server: NewHTTPServer(h.API.OwnerHandler(), k.Log), Listener: h.API.OwnerListener(ownerLn)}
		ingress = roomtest.Door{Server: NewHTTPServer(h.API.IngressHandler(), k.Log), Listener: h.API.IngressListener(ingressLn)}
		return owner, ingress
	}
	h.Harness = roomtest.Open(t, ko)
	h.client = h.HTTP()
	return h
}

// serverPort is a test server's port as text (the kit's).
var serverPort = roomtest.ServerPort

// apiResp is a finished HTTP exchange.
type apiResp = roomtest.Response

// reqOpt adjusts a request before it is sent.
type reqOpt = mcptest.ReqOpt

var (
	withHeader = mcptest.WithHeader
	withHost   = mcptest.WithHost
	withCookie = mcptest.WithCookie
)

// withOrigin sets the Origin header (a page's own is its listener's URL).
func withOrigin(o string) reqOpt { return withHeader("Origin", o) }

// do sends one request; token "" sends no Authorization header.
func (h *roomHarness) do(method, url, token string, body any, opts ...reqOpt) apiResp {
	h.t.Helper()
	return h.Do(h.t, method, url, token, body, opts...)
}

// inviteGrant is the answer to POST /workspace/invite.
type inviteGrant = mcptest.Invitation

// sessionGrant is the answer to POST /session/join.
type sessionGrant = mcptest.Session

// joinRaw posts body to /session/join on the ingress listener.
func (h *roomHarness) joinRaw(body any, opts ...reqOpt) apiResp {
	h.t.Helper()
	return h.do("POST", h.IngressURL("/session/join"), "", body, opts...)
}

// redeem is join with an invitation the test made itself: it redeems invite
// (URI, payload or secret) under name and requires success.
func (h *roomHarness) redeem(invite, name string) party {
	h.t.Helper()
	return h.fromKit(h.Redeem(invite, name))
}

// party is one participant of a test room: the kit's Party with this
// package's MCP client names (mcp without the Tasks extension, ext with it).
type party struct {
	sessionGrant
	mcp *mcpClient // without the Tasks extension
	ext *mcpClient // declaring it
}

func (h *roomHarness) fromKit(p roomtest.Party) party {
	return party{sessionGrant: p.Session, mcp: wrapMCP(h, p.SessionToken, p.MCP), ext: wrapMCP(h, p.SessionToken, p.Ext)}
}

// asParty wraps a session in its two MCP clients.
func (h *roomHarness) asParty(g sessionGrant) party { return h.fromKit(h.AsParty(g)) }

// join is the one way a test admits a participant: the operator invites
// with caps (none: the default agent grant) and name redeems it on the
// ingress listener. The party holds exactly caps.
func (h *roomHarness) join(name string, caps ...string) party {
	h.t.Helper()
	return h.fromKit(h.Join(name, caps...))
}

// joinMany joins n parties holding caps through one multi-use invitation,
// a few joins at a time (named s000, s001, …).
func (h *roomHarness) joinMany(t testing.TB, n int, caps ...string) []party {
	t.Helper()
	ps := h.JoinMany(t, n, caps...)
	out := make([]party, len(ps))
	for i, p := range ps {
		out[i] = h.fromKit(p)
	}
	return out
}

// wantError checks an error answer: status, the error code, a message, and a
// JSON content type.
var wantError = roomtest.WantError

// wantOK checks a 200 JSON answer.
var wantOK = roomtest.WantOK

// sidecarTables are the tables a "nothing changed" check covers.
var sidecarTables = roomtest.SidecarTables

// eventRow is one row of the events table.
type eventRow = roomtest.EventRow

// wire formats a time as the API does.
func wire(t time.Time) string { return room.WireTime(t.UnixMilli()) }

// invitePayload decodes the JSON inside a commonroom://join/ URI.
func invitePayload(t testing.TB, uri string) []byte {
	t.Helper()
	enc, ok := strings.CutPrefix(uri, room.InvitePrefix)
	if !ok {
		t.Fatalf("not an invitation URI: %q", uri)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("invitation payload is not base64url: %v", err)
	}
	return b
}

// sha256Of is the digest the sidecar stores for a secret.
func sha256Of(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// workspaceRoutes is every /workspace route server.go registers, with a
// body that would be acceptable to it.
var workspaceRoutes = []struct {
	Method, Path string
	Body         any
}{
	{"GET", "/workspace/status", nil},
	{"GET", "/workspace/summary", nil},
	{"GET", "/workspace/regions", nil},
	{"GET", "/workspace/read", nil},
	{"GET", "/workspace/history", nil},
	{"GET", "/workspace/participants", nil},
	{"GET", "/workspace/invites", nil},
	{"POST", "/workspace/invite", map[string]any{}},
	{"POST", "/workspace/invite/revoke", map[string]any{"invite_id": "invite_0000000000000000"}},
	{"POST", "/workspace/leave", map[string]any{}},
	{"POST", "/workspace/session/end", map[string]any{"participant_id": "participant_0000000000000000"}},
}

// readRoutes are the workspace reads that need the read capability.
var readRoutes = []string{
	"/workspace/status", "/workspace/summary", "/workspace/regions",
	"/workspace/read", "/workspace/history", "/workspace/participants",
}

// ---- options ----

// harnessOpts chooses what newHarness changes from the default harness.
type harnessOpts struct {
	Limits func(*room.Limits) // adjusts room.Defaults()
	Hub    listen.Config      // Logger and Now are filled in when nil
	// Gate, when set, stands between the room's writer and the hub; see publishGate.
	Gate *publishGate
	// InMemory puts the room's files on tmpfs (/dev/shm) when there is
	// one, for tests that push megabytes through the sidecar.
	InMemory bool
	// Actor adjusts the room actor's configuration (the sweeper, the file
	// watcher) after the harness has filled it in.
	Actor func(*actor.Config)
	// Server adjusts the front door's configuration (timeouts, caps).
	Server func(*Config)
}

// publishGate is the room's Publisher in front of the hub. Armed, it holds the
// next batch the writer hands over, reports whether the writer had already
// answered that batch's caller (the writer's Commands counter moved past
// the count taken when arming: runBatch counts each command just before
// answering it), and forwards the batch only when released. That makes
// the window between "the caller has its answer" and "the hub has the
// change" as wide as a test needs, without sleeping.
type publishGate struct {
	hub     *listen.Hub
	mu      sync.Mutex
	room    *actor.Room
	armed   bool
	base    uint64
	entered chan bool
	release chan struct{}
}

func (g *publishGate) Publish(b listen.Batch) {
	g.mu.Lock()
	armed, base, r := g.armed, g.base, g.room
	g.armed = false
	g.mu.Unlock()
	if armed {
		g.entered <- r.Stats().Commands.Load() > base
		<-g.release
	}
	g.hub.Publish(b)
}

// arm catches the next batch. Nothing else may be writing meanwhile.
func (g *publishGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	g.base = g.room.Stats().Commands.Load()
}

// ---- the document, edited out of band ----

// threeSections builds a document from the three sections' bodies.
func threeSections(idea, goals, plan string) string {
	return "# Idea\n\n" + idea + "\n\n## Goals\n\n" + goals + "\n\n## Plan\n\n" + plan + "\n"
}

// noteError keeps the body of an error answer (status >= 400) for ErrorBodies.
func (h *roomHarness) noteError(r mcptest.Response) { h.NoteError(r) }
