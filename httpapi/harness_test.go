package httpapi

// The HTTP test harness: a real room (a Markdown file and its SQLite sidecar
// in t.TempDir(), the engine, the actor, a listen hub) behind both front-door
// handlers, each served on its own real listener bound to 127.0.0.1:0.
// Time is a fake clock the tests advance; expiry is applied with
// (*actor.Room).Sweep, never by sleeping.
//
// The vocabulary every test uses: newHarness (with harnessOpts) opens a
// room; h.join admits a participant as a party (its session, its MCP client
// and its Tasks-extension client); h.do sends plain HTTP and answers an
// apiResp; a party's mcpClient answers an mcpResp (client_test.go); streams
// are read frame by frame (stream_test.go).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// harnessDoc is the document every harness starts from unless told otherwise.
const harnessDoc = "# Idea\n\nhello world\n\n## Goals\n\nship it\nsoon\n\n## Plan\n\nstep one\nstep two\nstep three\n"

// harnessOperatorToken is the operator credential the harness configures.
const harnessOperatorToken = "op_test_7f3c1a9e5b2d4c6e8a0f1b3d5e7a9c1e"

// EncodeChange is the hub's encoder the test servers use, as ce serve does.
var EncodeChange = mcp.EncodeChange

// fakeClock is the room's injectable clock; safe for concurrent use.
type fakeClock = room.ManualClock

func newFakeClock() *fakeClock {
	return room.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
}

// lockedBuffer collects log output written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// roomHarness is one room served over HTTP.
type roomHarness struct {
	t       testing.TB
	Dir     string
	Doc     string // the Markdown file
	Clock   *fakeClock
	Logs    *lockedBuffer
	Log     *slog.Logger
	OpToken string

	Eng     *room.Engine
	Store   *room.Store
	Hub     *listen.Hub
	Room    *actor.Room
	API     *Server
	Owner   *httptest.Server
	Ingress *httptest.Server

	client *http.Client
	opts   harnessOpts // what this harness changes from the defaults, kept for restart

	mu        sync.Mutex
	errBodies []string // every error response body seen (status >= 400)
	running   bool
}

// newHarness opens a room around a fresh file holding content (harnessDoc
// when empty) and serves it; everything is closed by t.Cleanup. An options
// value (at most one) chooses the room's limits, the hub's configuration, a
// publication gate or tmpfs; restart keeps them.
func newHarness(t testing.TB, content string, opts ...harnessOpts) *roomHarness {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("newHarness takes at most one harnessOpts, got %d", len(opts))
	}
	var o harnessOpts
	if len(opts) == 1 {
		o = opts[0]
	}
	if content == "" {
		content = harnessDoc
	}
	dir := harnessDir(t, o.InMemory)
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	h := &roomHarness{
		t: t, Dir: dir, Doc: doc, Clock: newFakeClock(), Logs: logs,
		Log:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OpToken: harnessOperatorToken,
		client: &http.Client{
			Timeout:       30 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		opts: o,
	}
	h.start()
	t.Cleanup(func() {
		h.stop()
		h.client.CloseIdleConnections()
	})
	return h
}

func localListener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// start opens the room on h.Doc and serves it on two new listeners, each
// with ce serve's own server configuration (NewHTTPServer).
func (h *roomHarness) start() {
	t := h.t
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
	if cfg.Encode == nil {
		cfg.Encode = EncodeChange
	}
	hub := listen.NewHub(cfg)
	var pub actor.Publisher = hub
	if o.Gate != nil {
		o.Gate.hub = hub
		o.Gate.entered = make(chan bool, 1)
		o.Gate.release = make(chan struct{})
		pub = o.Gate
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
	if o.Gate != nil {
		o.Gate.mu.Lock()
		o.Gate.room = r
		o.Gate.mu.Unlock()
	}
	ownerLn, ingressLn := localListener(t), localListener(t)
	eng.SetHints([]room.Hint{{Type: "loopback", Address: "127.0.0.1", Port: ingressLn.Addr().(*net.TCPAddr).Port, Mode: "local"}})
	apiCfg := Config{Room: r, Hub: hub, Logger: h.Log, OperatorToken: h.OpToken, Version: "test"}
	if o.Server != nil {
		o.Server(&apiCfg)
	}
	api := New(apiCfg)
	serve := func(handler http.Handler, ln net.Listener) *httptest.Server {
		s := httptest.NewUnstartedServer(handler)
		s.Listener.Close()
		s.Listener = ln
		s.Config = NewHTTPServer(handler, h.Log)
		s.Start()
		return s
	}
	h.Eng, h.Store, h.Hub, h.Room, h.API = eng, st, hub, r, api
	h.Owner = serve(api.OwnerHandler(), api.OwnerListener(ownerLn))
	h.Ingress = serve(api.IngressHandler(), api.IngressListener(ingressLn))
	h.running = true
}

// stop closes the listeners (waiting for requests in flight), the hub, the
// actor and the store. It is idempotent.
func (h *roomHarness) stop() {
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
		h.t.Errorf("closing the room: %v", err)
	}
	if err := h.Store.Close(); err != nil {
		h.t.Errorf("closing the store: %v", err)
	}
}

// restart closes everything and opens the same files again (new listeners,
// new engine and actor, same clock, logs and operator token).
func (h *roomHarness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

func (h *roomHarness) ownerURL(path string) string   { return h.Owner.URL + path }
func (h *roomHarness) ingressURL(path string) string { return h.Ingress.URL + path }

// port returns a test server's port as text.
func serverPort(s *httptest.Server) string {
	return fmt.Sprint(s.Listener.Addr().(*net.TCPAddr).Port)
}

// apiResp is a finished HTTP exchange.
type apiResp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object.
func (r apiResp) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// Into decodes the body into v.
func (r apiResp) Into(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d does not decode into %T: %v\n%s", r.Status, v, err, r.Body)
	}
}

// reqOpt adjusts a request before it is sent.
type reqOpt = mcptest.ReqOpt

var (
	withBearer = mcptest.WithBearer
	withHeader = mcptest.WithHeader
	withHost   = mcptest.WithHost
	withCookie = mcptest.WithCookie
)

// do sends one request; token "" sends no Authorization header.
func (h *roomHarness) do(method, url, token string, body any, opts ...reqOpt) apiResp {
	h.t.Helper()
	return h.doT(h.t, method, url, token, body, opts...)
}

// doT is do reporting to t (for subtests and goroutines that must not call
// Fatal on the parent).
func (h *roomHarness) doT(t testing.TB, method, url, token string, body any, opts ...reqOpt) apiResp {
	t.Helper()
	r, err := h.send(method, url, token, body, opts...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// send is do returning the transport error instead of failing the test.
func (h *roomHarness) send(method, url, token string, body any, opts ...reqOpt) (apiResp, error) {
	r, err := mcptest.Do(context.Background(), h.client, method, url, token, body, opts...)
	if err != nil {
		return apiResp{}, err
	}
	h.noteError(r)
	return apiResp{Status: r.Status, Header: r.Header, Body: r.Raw}, nil
}

// noteError keeps the body of an error answer (status >= 400) for errorBodies.
func (h *roomHarness) noteError(r mcptest.Response) {
	if r.Status >= 400 {
		h.mu.Lock()
		h.errBodies = append(h.errBodies, string(r.Raw))
		h.mu.Unlock()
	}
}

// errorBodies returns every error body the harness has received.
func (h *roomHarness) errorBodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errBodies)
}

// inviteGrant is the answer to POST /workspace/invite.
type inviteGrant = mcptest.Invitation

// sessionGrant is the answer to POST /session/join.
type sessionGrant = mcptest.Session

// createInvite asks the owner listener, as the operator, for an invitation.
// in is the request body (nil: {}).
func (h *roomHarness) createInvite(in map[string]any) inviteGrant {
	h.t.Helper()
	g, err := mcptest.Invite(context.Background(), h.client, h.Owner.URL, h.OpToken, in)
	if err != nil {
		h.t.Fatal(err)
	}
	return g
}

// inviteCaps creates a one-use invitation granting caps.
func (h *roomHarness) inviteCaps(caps ...string) inviteGrant {
	h.t.Helper()
	if len(caps) == 0 {
		return h.createInvite(nil) // the field left out: the default agent set
	}
	return h.createInvite(map[string]any{"capabilities": caps})
}

// joinRaw posts body to /session/join on the ingress listener.
func (h *roomHarness) joinRaw(body any, opts ...reqOpt) apiResp {
	h.t.Helper()
	return h.do("POST", h.ingressURL("/session/join"), "", body, opts...)
}

// redeem is join with an invitation the test made itself: it redeems invite
// (URI, payload or secret) under name and requires success.
func (h *roomHarness) redeem(invite, name string) party {
	h.t.Helper()
	g, err := mcptest.Join(context.Background(), h.client, h.Ingress.URL, invite, name, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return h.asParty(g)
}

// party is one participant of a test room: its session (embedded, so
// p.SessionToken and p.ParticipantID read as the join's answer), an MCP
// client without the Tasks extension and one declaring it, both on the
// ingress listener as that session.
type party struct {
	sessionGrant
	mcp *mcpClient // without the Tasks extension
	ext *mcpClient // declaring it
}

// asParty wraps a session in its two MCP clients.
func (h *roomHarness) asParty(g sessionGrant) party {
	c := newMCPClient(h, g.SessionToken, false)
	return party{sessionGrant: g, mcp: c, ext: c.withTasks(true)}
}

// join is the one way a test admits a participant: the operator invites
// with caps (none: the default agent grant) and name redeems it on the
// ingress listener. The party holds exactly caps.
func (h *roomHarness) join(name string, caps ...string) party {
	h.t.Helper()
	return h.redeem(h.inviteCaps(caps...).URI, name)
}

// wantError checks an error answer: status, the error code, a message, and a
// JSON content type.
func wantError(t testing.TB, r apiResp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (%s); body %s", r.Status, status, code, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	m := r.JSON(t)
	if m["error"] != code {
		t.Fatalf("error = %v, want %q; body %s", m["error"], code, r.Body)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("error body has no message: %s", r.Body)
	}
	return m
}

// wantOK checks a 200 JSON answer.
func wantOK(t testing.TB, r apiResp) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", r.Status, r.Body)
	}
}

// sidecarTables are the tables a "nothing changed" check covers.
var sidecarTables = []string{"meta", "participants", "sessions", "invites", "versions", "events",
	"leases", "proposals", "handoffs", "tasks", "task_inputs"}

// tableState is a table's row count and a digest of every row.
type tableState struct {
	Rows   int
	Digest string
}

type dbSnapshot map[string]tableState

// queryRows runs a query on the read pool and returns its column names and
// every row's values, whatever the columns are.
func (h *roomHarness) queryRows(t testing.TB, query string, args ...any) (cols []string, rows [][]any) {
	t.Helper()
	rs, err := h.Store.Reader.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rs.Close()
	cols, _ = rs.Columns()
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		rows = append(rows, vals)
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return cols, rows
}

// snapshot reads every table through the store's read pool: row counts and
// a digest of all values, so an assertion sees changed rows, not only new ones.
func (h *roomHarness) snapshot() dbSnapshot {
	h.t.Helper()
	snap := dbSnapshot{}
	for _, table := range sidecarTables {
		_, rows := h.queryRows(h.t, "SELECT * FROM "+table)
		lines := make([]string, 0, len(rows))
		for _, vals := range rows {
			lines = append(lines, fmt.Sprintf("%#v", vals))
		}
		slices.Sort(lines)
		sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
		snap[table] = tableState{Rows: len(lines), Digest: hex.EncodeToString(sum[:8])}
	}
	return snap
}

// diff lists the tables whose rows differ between two snapshots.
func (a dbSnapshot) diff(b dbSnapshot) []string {
	var out []string
	for _, table := range sidecarTables {
		if a[table] != b[table] {
			out = append(out, fmt.Sprintf("%s: %d rows -> %d rows (digest %s -> %s)",
				table, a[table].Rows, b[table].Rows, a[table].Digest, b[table].Digest))
		}
	}
	return out
}

// assertUnchanged fails t when any row of any table changed since before.
func (h *roomHarness) assertUnchanged(t testing.TB, before dbSnapshot) {
	t.Helper()
	if d := before.diff(h.snapshot()); len(d) > 0 {
		t.Errorf("rows changed, want none:\n  %s", strings.Join(d, "\n  "))
	}
}

// count runs a count query on the read pool.
func (h *roomHarness) count(query string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.Store.Reader.QueryRow(query, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// status reads the status column of one row of a table whose key is
// kind_id (kind "proposal", "handoff"): the state a test expects a record
// to be left in.
func (h *roomHarness) status(t testing.TB, kind, id string) string {
	t.Helper()
	var s string
	if err := h.Store.Reader.QueryRow(`SELECT status FROM `+kind+`s WHERE `+kind+`_id = ?`, id).Scan(&s); err != nil {
		t.Fatalf("%s %s: %v", kind, id, err)
	}
	return s
}

// eventRow is one row of the events table.
type eventRow struct {
	ID      int64
	Type    string
	Actor   *string
	Payload map[string]any
	Raw     string
}

// events returns the event rows of type typ ("" for all), oldest first.
func (h *roomHarness) events(typ string) []eventRow {
	h.t.Helper()
	rows, err := h.Store.Reader.Query(`SELECT event_id, event_type, actor_id, payload_json FROM events
		WHERE ? = '' OR event_type = ? ORDER BY event_id`, typ, typ)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var ev eventRow
		if err := rows.Scan(&ev.ID, &ev.Type, &ev.Actor, &ev.Raw); err != nil {
			h.t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(ev.Raw), &ev.Payload); err != nil {
			h.t.Fatalf("event %d payload is not JSON: %v", ev.ID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// sweep applies the time-based rules now, as the sweeper would.
func (h *roomHarness) sweep() {
	h.t.Helper()
	if err := h.Room.Sweep(context.Background()); err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
}

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
	// one, for tests that push megabytes through the sidecar: its commits
	// fsync, and on a disk that, not the code under test, would dominate.
	InMemory bool
	// Actor adjusts the room actor's configuration (the sweeper, the file
	// watcher) after the harness has filled it in.
	Actor func(*actor.Config)
	// Server adjusts the front door's configuration (timeouts, caps).
	Server func(*Config)
}

// harnessDir is t.TempDir(), on /dev/shm when asked and available.
func harnessDir(t testing.TB, inMemory bool) string {
	t.Helper()
	if inMemory {
		if dir, err := os.MkdirTemp("/dev/shm", "ce-listen-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
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

// joinMany joins n parties holding caps through one multi-use invitation,
// a few joins at a time (named s000, s001, …).
func (h *roomHarness) joinMany(t testing.TB, n int, caps ...string) []party {
	t.Helper()
	inv := h.createInvite(map[string]any{"capabilities": caps, "max_uses": n, "max_live_sessions": n})
	gs, err := mcptest.JoinMany(context.Background(), h.client, h.Ingress.URL, inv.URI, "s%03d", "", n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]party, n)
	for i, g := range gs {
		out[i] = h.asParty(g)
	}
	return out
}

// ---- the document, edited out of band ----

// editFile replaces the file out of band, then makes the room notice with a
// workspace_status call through /mcp, and returns the version it reports.
// Contents must differ in length from the previous ones: the file's stamp
// (size, mtime, inode) is how the room notices an edit, and two writes within
// one clock tick keep the same mtime.
func (h *roomHarness) editFile(t testing.TB, token, content string) int64 {
	t.Helper()
	before := h.statusVersion(t, token)
	if err := os.WriteFile(h.Doc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	after := h.statusVersion(t, token)
	if after != before+1 {
		t.Fatalf("the out-of-band edit made version %d, want %d", after, before+1)
	}
	return after
}

func (h *roomHarness) statusVersion(t testing.TB, token string) int64 {
	t.Helper()
	st := newMCPClient(h, token, false).toolOK(t, "workspace_status", map[string]any{})
	v, ok := st["version"].(float64)
	if !ok {
		t.Fatalf("workspace_status has no version: %v", st)
	}
	return int64(v)
}

// threeSections builds a document from the three sections' bodies.
func threeSections(idea, goals, plan string) string {
	return "# Idea\n\n" + idea + "\n\n## Goals\n\n" + goals + "\n\n## Plan\n\n" + plan + "\n"
}
