package cli

// An invitation is never handed to a stranger (issue 25, item 2), with the
// real ce: when the first hint fails, `ce join`, `ce mcp` and `ce call`
// walk on to the loopback hint, and whatever listens on that port of the
// joiner's machine must learn nothing that redeems the invitation or
// carries the session — whether it answers like a room, relays to the
// real one, or sits on a loopback hint made on another machine. The
// invitation stays good for its holder afterwards.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// stranger is a real HTTP server on 127.0.0.1 that records every byte it
// receives and sends, on every connection.
type stranger struct {
	port  int
	mu    sync.Mutex
	seen  bytes.Buffer
	conns int
}

// recordingConn tees a connection's bytes into its stranger's record.
type recordingConn struct {
	net.Conn
	s *stranger
}

func (c recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.s.keep(b[:n])
	return n, err
}

func (c recordingConn) Write(b []byte) (int, error) {
	c.s.keep(b)
	return c.Conn.Write(b)
}

func (s *stranger) keep(b []byte) {
	s.mu.Lock()
	s.seen.Write(b)
	s.mu.Unlock()
}

// recordingListener counts connections and wraps each in a recordingConn.
type recordingListener struct {
	net.Listener
	s *stranger
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	l.s.conns++
	l.s.mu.Unlock()
	return recordingConn{Conn: c, s: l.s}, nil
}

// newStranger serves h on a fresh loopback port until the test ends.
func newStranger(t *testing.T, h http.Handler) *stranger {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stranger{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: h}
	go srv.Serve(recordingListener{Listener: ln, s: s})
	t.Cleanup(func() { srv.Close() })
	return s
}

// record is everything the stranger saw, and how many connections it took.
func (s *stranger) record() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.String(), s.conns
}

// impostorToken is the session token the impostor hands out: its own, not
// one a stranger learnt.
const impostorToken = "ses_from_the_impostor"

// impostor answers every request as a room would answer a challenge, with
// the right room and invitation and a proof it cannot have made: a client
// that does not check the proof would go on and send what it holds.
func impostor(inv room.Invitation) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"workspace_id": inv.WorkspaceID, "invite_id": inv.InviteID, "server_nonce": room.NewJoinNonce(),
			"room_proof": room.NewJoinNonce(), "expires_at": "2099-01-01T00:00:00.000Z",
			"session_token": impostorToken, "participant_id": "participant_impostor", "capabilities": []string{"read"},
		})
	})
}

// relay carries every request to the real room at ingress and its answer
// back: a stranger on the path that makes the room answer for it.
func relay(t *testing.T, ingress string) http.Handler {
	t.Helper()
	target, err := url.Parse(ingress)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(target)
}

// wantNothingUsable fails if what the stranger saw holds the invitation's
// secret, k = SHA-256(secret) in any common encoding, the invitation
// itself, or any of the session tokens.
func wantNothingUsable(t *testing.T, s *stranger, uri string, tokens ...string) {
	t.Helper()
	seen, _ := s.record()
	inv := decodeInvite(t, uri)
	k := room.JoinKey(inv.Secret)
	forms := map[string]string{
		"the secret": inv.Secret, "the invitation": strings.TrimPrefix(uri, room.InvitePrefix),
		"k in hex": hex.EncodeToString(k), "k in base64url": base64.RawURLEncoding.EncodeToString(k),
		"k in base64": base64.StdEncoding.EncodeToString(k), "k in raw bytes": string(k),
	}
	for _, tok := range tokens {
		if tok != impostorToken {
			forms["the session token "+tok[:8]+"…"] = tok
		}
	}
	for what, v := range forms {
		if strings.Contains(seen, v) {
			t.Errorf("the stranger saw %s:\n%s", what, seen)
		}
	}
	for _, u := range invitationRE.FindAllString(seen, -1) {
		if got, err := room.DecodeInvitation(u, room.Defaults().MaxInvitePayload); err == nil && got.Secret == inv.Secret {
			t.Errorf("the stranger saw the invitation with its secret:\n%s", seen)
		}
	}
}

// invitationRE finds an invitation URI in what a stranger saw.
var invitationRE = regexp.MustCompile(regexp.QuoteMeta(room.InvitePrefix) + `[A-Za-z0-9_-]+`)

// strangerRoom is a served room and the pieces the tests recombine into
// invitations: its live loopback hint (tagged with this machine), a first
// hint whose plugin refuses every dial, and the plugin PATH.
type strangerRoom struct {
	dir   string
	s     *server
	pp    pluginPath
	live  room.Hint
	fails room.Hint
}

func newStrangerRoom(t *testing.T) strangerRoom {
	t.Helper()
	pp := newPluginPath(t)
	dir := t.TempDir()
	newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json")
	live := decodeInvite(t, s.Banner.Invite).Transports[0]
	if tag := room.MachineTag(s.Banner.WorkspaceID); live.Params[room.HintParamMachine] != tag {
		t.Fatalf("the loopback hint's machine tag is %q, this machine's %q", live.Params[room.HintParamMachine], tag)
	}
	return strangerRoom{dir: dir, s: s, pp: pp, live: live,
		fails: room.Hint{Type: "exec:refuses", Address: "x.invalid", Port: 1, Mode: "private"}}
}

// invite is a fresh invitation of the room (max_uses 1).
func (r strangerRoom) invite(t *testing.T) string {
	t.Helper()
	return inviteOnce(t, r.dir, "idea.md")
}

// at is the live loopback hint moved to the stranger's port: the room's
// own hint, as it reads on the joiner's machine when a stranger holds the
// port there.
func (r strangerRoom) at(s *stranger) room.Hint {
	h := r.live
	h.Port = s.port
	return h
}

func (r strangerRoom) participants(t *testing.T) int {
	return status(t, r.dir, "idea.md").Status.Participants
}

// TestJoinNeverHandsTheInvitationToAStranger: ce join with a first hint
// that fails and a loopback hint that leads to a stranger.
func TestJoinNeverHandsTheInvitationToAStranger(t *testing.T) {
	r := newStrangerRoom(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, uri string)
	}{
		{"an_impostor_on_the_loopback_port_learns_nothing_and_the_invitation_still_joins", func(t *testing.T, uri string) {
			st := newStranger(t, impostor(decodeInvite(t, uri)))
			before := r.participants(t)
			res := ce(t, r.dir, r.pp.env, "join", withHints(t, uri, r.fails, r.at(st)), "--name", "victim", "--json")
			if _, conns := st.record(); conns == 0 {
				t.Fatal("the stranger was never asked: the test proves nothing")
			}
			wantNothingUsable(t, st, uri)
			if res.code != exitBusy || !strings.Contains(res.stderr, "not the invited room") || !strings.Contains(res.stderr, "not spent") {
				t.Fatalf("exit %d\n%s", res.code, res.output())
			}
			if r.participants(t) != before {
				t.Fatal("someone joined")
			}
			if g := join(t, r.dir, uri, "holder"); g.WorkspaceID != r.s.Banner.WorkspaceID {
				t.Fatalf("the invitation does not join its holder afterwards: %+v", g)
			}
		}},
		{"an_impostor_before_the_room_is_passed_over_and_the_room_admits", func(t *testing.T, uri string) {
			st := newStranger(t, impostor(decodeInvite(t, uri)))
			res := mustCE(t, r.dir, r.pp.env, "join", withHints(t, uri, r.fails, r.at(st), r.live), "--name", "holder", "--json")
			var g joinGrant
			decodeJSON(t, res, &g)
			wantNothingUsable(t, st, uri, g.SessionToken)
			if code, _ := httpDo(t, "GET", r.s.Banner.IngressURL+"/workspace/status", g.SessionToken, nil); code != http.StatusOK {
				t.Fatalf("the session does not work: %d", code)
			}
		}},
		{"a_relay_to_the_real_room_admits_the_holder_and_learns_no_session", func(t *testing.T, uri string) {
			st := newStranger(t, relay(t, r.s.Banner.IngressURL))
			res := mustCE(t, r.dir, r.pp.env, "join", withHints(t, uri, r.fails, r.at(st)), "--name", "holder", "--json", "--no-hold")
			var g joinGrant
			decodeJSON(t, res, &g)
			if _, conns := st.record(); conns == 0 {
				t.Fatal("the join did not go through the relay")
			}
			// The page key (issue 28) came sealed too: the relay saw no way
			// into the holder's page either.
			var page struct {
				PageURL string `json:"page_url"`
			}
			decodeJSON(t, res, &page)
			_, pageKey, _ := strings.Cut(page.PageURL, "?key=")
			if pageKey == "" {
				t.Fatalf("no page link: %s", res.stdout)
			}
			wantNothingUsable(t, st, uri, g.SessionToken, pageKey)
			if code, _ := httpDo(t, "GET", r.s.Banner.IngressURL+"/workspace/status", g.SessionToken, nil); code != http.StatusOK {
				t.Fatalf("the session does not work: %d", code)
			}
		}},
		{"a_loopback_hint_made_on_another_machine_is_never_dialled", func(t *testing.T, uri string) {
			st := newStranger(t, impostor(decodeInvite(t, uri)))
			elsewhere := r.at(st)
			elsewhere.Params = map[string]string{room.HintParamMachine: strings.Repeat("0", 32)}
			res := ce(t, r.dir, r.pp.env, "join", withHints(t, uri, r.fails, elsewhere), "--name", "victim")
			if seen, conns := st.record(); conns != 0 {
				t.Fatalf("the hint was dialled (%d connections):\n%s", conns, seen)
			}
			if res.code != exitBusy || !strings.Contains(res.stderr, "the room is on another machine") || !strings.Contains(res.stderr, "not dialled") {
				t.Fatalf("exit %d\n%s", res.code, res.output())
			}
			if g := join(t, r.dir, uri, "holder"); g.WorkspaceID != r.s.Banner.WorkspaceID {
				t.Fatalf("the invitation does not join its holder afterwards: %+v", g)
			}
		}},
		{"a_loopback_hint_without_a_machine_tag_is_tried", func(t *testing.T, uri string) {
			untagged := r.live
			untagged.Params = nil
			res := mustCE(t, r.dir, r.pp.env, "join", withHints(t, uri, r.fails, untagged), "--name", "holder", "--json")
			var g joinGrant
			decodeJSON(t, res, &g)
			if g.WorkspaceID != r.s.Banner.WorkspaceID {
				t.Fatalf("joined %+v", g)
			}
		}},
		{"an_invitation_without_its_id_is_refused_before_any_dial", func(t *testing.T, uri string) {
			st := newStranger(t, impostor(decodeInvite(t, uri)))
			inv := decodeInvite(t, withHints(t, uri, r.fails, r.at(st)))
			inv.InviteID = ""
			res := ce(t, r.dir, r.pp.env, "join", room.EncodeInvitation(inv), "--name", "victim")
			if seen, conns := st.record(); conns != 0 {
				t.Fatalf("the hint was dialled (%d connections):\n%s", conns, seen)
			}
			if res.code != exitUsage || !strings.Contains(res.stderr, "names no invite_id") {
				t.Fatalf("exit %d\n%s", res.code, res.output())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r.invite(t)) })
	}
}

// TestMCPFirstStartJoinsOnlyTheRoom: ce mcp's first start joins over the
// invitation's hints (joinRemote) as ce join does: past an impostor on the
// loopback port, which learns nothing, to the room.
func TestMCPFirstStartJoinsOnlyTheRoom(t *testing.T) {
	r := newStrangerRoom(t)
	uri := r.invite(t)
	st := newStranger(t, impostor(decodeInvite(t, uri)))
	state := filepath.Join(t.TempDir(), "session.json")
	b := startBridge(t, r.dir, withHints(t, uri, r.fails, r.at(st), r.live), state, r.pp.env)
	waitFile(t, state, true) // written once it has joined
	s := readState(t, state)
	if _, conns := st.record(); conns == 0 {
		t.Fatal("the stranger was never asked: the test proves nothing")
	}
	wantNothingUsable(t, st, uri, s.SessionToken)
	if s.WorkspaceID != r.s.Banner.WorkspaceID || s.SessionToken == "" || s.URL != r.s.Banner.IngressURL {
		t.Fatalf("state %+v", s)
	}
	waitState(t, b)
	if code := b.closeAndWait(); code != 0 {
		t.Errorf("ce mcp exit %d", code)
	}
}

// TestCallInviteSendsTheSessionOnlyToTheRoom: ce call --invite has what a
// hint leads to prove it is the room before the session goes there: an
// impostor on the loopback port gets no session, and the call reaches the
// room over the next hint.
func TestCallInviteSendsTheSessionOnlyToTheRoom(t *testing.T) {
	r := newStrangerRoom(t)
	g := join(t, r.dir, r.invite(t), "caller")
	uri := r.invite(t)
	for _, tc := range []struct {
		name     string
		hints    func(st *stranger) []room.Hint
		wantCode int
	}{
		{"an_impostor_before_the_room_is_passed_over", func(st *stranger) []room.Hint { return []room.Hint{r.fails, r.at(st), r.live} }, 0},
		{"an_impostor_alone_gets_nothing_and_the_call_fails", func(st *stranger) []room.Hint { return []room.Hint{r.fails, r.at(st)} }, exitBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStranger(t, impostor(decodeInvite(t, uri)))
			res := ceWithin(t, runTimeout, r.dir, r.pp.env, "call", "GET", "/workspace/status", "--session", g.SessionToken,
				"--invite", withHints(t, uri, tc.hints(st)...))
			if _, conns := st.record(); conns == 0 {
				t.Fatal("the stranger was never asked: the test proves nothing")
			}
			wantNothingUsable(t, st, uri, g.SessionToken)
			if res.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.wantCode, res.output())
			}
			if tc.wantCode == 0 && decodeCall(t, res).Status != http.StatusOK {
				t.Fatalf("answer %s", res.stdout)
			}
		})
	}
	if j := join(t, r.dir, uri, "later"); j.WorkspaceID != r.s.Banner.WorkspaceID {
		t.Errorf("ce call spent the invitation: %+v", j)
	}
}
