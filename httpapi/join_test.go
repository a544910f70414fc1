package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestJoin: every accepted spelling of an invitation yields a session whose
// token works and whose capabilities are the invitation's.
func TestJoin(t *testing.T) {
	caps := []string{"read", "propose"}
	cases := []struct {
		name string
		body func(g inviteGrant) map[string]any
	}{
		{"full URI is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": g.URI, "name": "uri-agent"}
		}},
		{"raw JSON payload is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": string(invitePayload(t, g.URI)), "name": "json-agent"}
		}},
		{"bare secret is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": g.Token, "name": "secret-agent"}
		}},
		{"invite_token alias is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite_token": g.URI, "name": "alias-agent"}
		}},
		{"URI with surrounding blanks is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": "  " + g.URI + "\n", "name": "blank-agent"}
		}},
		{"asking for more capabilities at join gets nothing more", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": g.URI, "name": "greedy", "capabilities": []string{"*"}}
		}},
		{"name of 80 characters is accepted", func(g inviteGrant) map[string]any {
			return map[string]any{"invite": g.URI, "name": strings.Repeat("é", 80)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			g := h.InviteCaps(caps...)
			body := tc.body(g)
			r := h.joinRaw(body)
			wantOK(t, r)
			var s sessionGrant
			r.Into(t, &s)
			m := r.JSON(t)
			for _, k := range []string{"session_token", "session_ref", "participant_id", "workspace_id", "capabilities", "expires_at"} {
				if _, ok := m[k]; !ok {
					t.Errorf("join answer lacks %q: %s", k, r.Body)
				}
			}
			if !strings.HasPrefix(s.SessionToken, "ses_") || len(s.SessionToken) < 20 {
				t.Errorf("session_token = %q, want ses_ + random", s.SessionToken)
			}
			if s.SessionRef == "" || strings.Contains(s.SessionToken, s.SessionRef) {
				t.Errorf("session_ref = %q: want a handle distinct from the token", s.SessionRef)
			}
			if !strings.HasPrefix(s.ParticipantID, "participant_") || s.ParticipantID == h.Eng.HostID {
				t.Errorf("participant_id = %q, want a new participant", s.ParticipantID)
			}
			if s.WorkspaceID != h.Eng.WorkspaceID {
				t.Errorf("workspace_id = %q, want %q", s.WorkspaceID, h.Eng.WorkspaceID)
			}
			if !slices.Equal(s.Capabilities, caps) {
				t.Errorf("capabilities = %v, want the invitation's %v", s.Capabilities, caps)
			}
			if want := wire(h.Clock.Now().Add(8 * time.Hour)); s.ExpiresAt != want {
				t.Errorf("expires_at = %q, want %q (8 h)", s.ExpiresAt, want)
			}
			if want, _ := body["name"].(string); s.Name != want || s.Kind != "agent" {
				t.Errorf("name, kind = %q, %q; want %q, agent", s.Name, s.Kind, want)
			}

			st := h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil)
			wantOK(t, st)
			if got := st.JSON(t)["workspace_id"]; got != h.Eng.WorkspaceID {
				t.Errorf("status with the new token: workspace_id = %v", got)
			}
			// The session holds what the invitation granted, no more: no invite.
			wantError(t, h.do("GET", h.IngressURL("/workspace/invites"), s.SessionToken, nil), 403, "permission_denied")

			if n := h.Count(`SELECT used_count FROM invites WHERE invite_id = ?`, g.InviteID); n != 1 {
				t.Errorf("used_count = %d, want 1", n)
			}
			var pcaps, scaps string
			if err := h.Store.Reader.QueryRow(`SELECT p.capabilities, s.capabilities FROM participants p
				JOIN sessions s ON s.participant_id = p.participant_id WHERE s.session_ref = ?`, s.SessionRef).Scan(&pcaps, &scaps); err != nil {
				t.Fatal(err)
			}
			if pcaps != `["read","propose"]` || scaps != `["read","propose"]` {
				t.Errorf("stored capabilities participant=%s session=%s, want the invitation's", pcaps, scaps)
			}
			joined := h.Events("participant.joined")
			if len(joined) != 2 || joined[1].Payload["participant_id"] != s.ParticipantID {
				t.Errorf("participant.joined events = %+v, want host + this participant", joined)
			}
			created := h.Events("session.created")
			if len(created) != 1 || created[0].Payload["session_ref"] != s.SessionRef {
				t.Errorf("session.created events = %+v, want one for %s", created, s.SessionRef)
			}
		})
	}
}

// TestJoinKindAndTransport: kind human is kept; the transport label is the
// one the room saw (loopback here), never the one the client claims.
func TestJoinKindAndTransport(t *testing.T) {
	h := newHarness(t, "")
	g := h.InviteCaps("read")
	r := h.joinRaw(map[string]any{"invite": g.URI, "name": "Bo", "kind": "human", "transport": strings.Repeat("t", 100)})
	wantOK(t, r)
	var s sessionGrant
	r.Into(t, &s)
	if s.Kind != "human" || s.Transport != "loopback" {
		t.Errorf("kind=%q transport=%q, want human and loopback", s.Kind, s.Transport)
	}
}

// zeroReader yields an endless stream of 'a' and has no length, so a body
// made from it is sent chunked.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// oversizedJoin is a syntactically valid join body just over 1 MiB that would
// succeed if the size limit were not enforced.
func oversizedJoin(uri string) string {
	return `{"invite":"` + uri + `","name":"big","pad":"` + strings.Repeat("a", 1<<20) + `"}`
}

// TestJoinRefusals: every refused join answers the exact status and code,
// and changes no row (no use is spent, no participant or event is written).
func TestJoinRefusals(t *testing.T) {
	type setup struct {
		h *roomHarness
		g inviteGrant // a live, unused invitation (max_uses 1)
	}
	cases := []struct {
		name   string
		prep   func(s setup) // runs before the snapshot
		send   func(t *testing.T, s setup) apiResp
		status int
		code   string
		field  string
	}{
		{name: "unknown secret is unauthorized", status: 401, code: "unauthorized",
			send: func(t *testing.T, s setup) apiResp {
				return s.h.joinRaw(map[string]any{"invite": "definitely-not-a-secret-0123456789"})
			}},
		{name: "well-formed URI with unknown secret is unauthorized", status: 401, code: "unauthorized",
			send: func(t *testing.T, s setup) apiResp {
				other := "x" // a different first character, whatever the secret's is
				if s.g.Token[0] == 'x' {
					other = "y"
				}
				payload := strings.Replace(string(invitePayload(t, s.g.URI)), s.g.Token, other+s.g.Token[1:], 1)
				return s.h.joinRaw(map[string]any{"invite": payload})
			}},
		{name: "revoked invitation is invitation_revoked", status: 403, code: "invitation_revoked",
			prep: func(s setup) {
				wantOK(s.h.t, s.h.do("POST", s.h.OwnerURL("/workspace/invite/revoke"), s.h.OpToken, map[string]any{"invite_id": s.g.InviteID}))
			},
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"invite": s.g.URI}) }},
		{name: "expired invitation is invitation_expired", status: 403, code: "invitation_expired",
			prep: func(s setup) {
				s.h.Clock.Advance(61 * time.Minute)
				s.h.Sweep() // let the sweeper record the lapse before the snapshot
			},
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"invite": s.g.URI}) }},
		{name: "expired invitation is refused at the exact expiry instant", status: 403, code: "invitation_expired",
			prep: func(s setup) {
				s.h.Clock.Advance(60 * time.Minute)
				s.h.Sweep()
			},
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"invite": s.g.URI}) }},
		{name: "revoked and expired invitation is invitation_revoked (revocation checked first)", status: 403, code: "invitation_revoked",
			prep: func(s setup) {
				wantOK(s.h.t, s.h.do("POST", s.h.OwnerURL("/workspace/invite/revoke"), s.h.OpToken, map[string]any{"token": s.g.Token}))
				s.h.Clock.Advance(2 * time.Hour)
				s.h.Sweep()
			},
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"invite": s.g.URI}) }},
		{name: "expired and used-up invitation is invitation_expired (expiry checked before uses)", status: 403, code: "invitation_expired",
			prep: func(s setup) {
				s.h.redeem(s.g.URI, "first")
				s.h.Clock.Advance(2 * time.Hour)
				s.h.Sweep()
			},
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"invite": s.g.URI}) }},
		{name: "used-up invitation is invitation_redeemed", status: 403, code: "invitation_redeemed",
			prep: func(s setup) { s.h.redeem(s.g.URI, "first") },
			send: func(t *testing.T, s setup) apiResp {
				return s.h.joinRaw(map[string]any{"invite": s.g.URI, "name": "second"})
			}},
		{name: "malformed JSON is invalid_request", status: 400, code: "invalid_request",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(`{"invite": "` + s.g.URI + `"`) }},
		{name: "invite of the wrong type is invalid_request naming the field", status: 400, code: "invalid_request", field: "invite",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(`{"invite": 5}`) }},
		{name: "name of the wrong type is invalid_request naming the field", status: 400, code: "invalid_request", field: "name",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(`{"invite": "` + s.g.URI + `", "name": []}`) }},
		{name: "kind robot is invalid_request", status: 400, code: "invalid_request", field: "kind",
			send: func(t *testing.T, s setup) apiResp {
				return s.h.joinRaw(map[string]any{"invite": s.g.URI, "kind": "robot"})
			}},
		{name: "name of 81 characters is invalid_request", status: 400, code: "invalid_request", field: "name",
			send: func(t *testing.T, s setup) apiResp {
				return s.h.joinRaw(map[string]any{"invite": s.g.URI, "name": strings.Repeat("n", 81)})
			}},
		{name: "missing invite is invalid_request", status: 400, code: "invalid_request", field: "invite",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(map[string]any{"name": "x"}) }},
		{name: "empty body is invalid_request", status: 400, code: "invalid_request", field: "invite",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw("") }},
		{name: "JSON array body is invalid_request", status: 400, code: "invalid_request",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(`[{"invite": "` + s.g.URI + `"}]`) }},
		{name: "trailing garbage after the object is invalid_request", status: 400, code: "invalid_request",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(`{"invite": "` + s.g.URI + `"} garbage`) }},
		{name: "second object after the first is invalid_request", status: 400, code: "invalid_request",
			send: func(t *testing.T, s setup) apiResp {
				return s.h.joinRaw(`{"invite": "` + s.g.URI + `"}{"invite": "` + s.g.URI + `"}`)
			}},
		{name: "invitation payload of another version is unsupported_version", status: 400, code: "unsupported_version",
			send: func(t *testing.T, s setup) apiResp {
				payload := strings.Replace(string(invitePayload(t, s.g.URI)), `"version":"1"`, `"version":"2"`, 1)
				return s.h.joinRaw(map[string]any{"invite": payload})
			}},
		{name: "invitation payload of another protocol is invalid_request", status: 400, code: "invalid_request",
			send: func(t *testing.T, s setup) apiResp {
				payload := strings.Replace(string(invitePayload(t, s.g.URI)), `"protocol":"commonroom"`, `"protocol":"other"`, 1)
				return s.h.joinRaw(map[string]any{"invite": payload})
			}},
		{name: "body over 1 MiB with Content-Length is 413 limit_exceeded", status: 413, code: "limit_exceeded",
			send: func(t *testing.T, s setup) apiResp { return s.h.joinRaw(oversizedJoin(s.g.URI)) }},
		{name: "body over 1 MiB sent chunked through a pipe is 413 limit_exceeded", status: 413, code: "limit_exceeded",
			send: func(t *testing.T, s setup) apiResp {
				pr, pw := io.Pipe()
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, err := io.Copy(pw, strings.NewReader(oversizedJoin(s.g.URI)))
					pw.CloseWithError(err)
				}()
				r := s.h.joinRaw(pr, func(r *http.Request) { r.ContentLength = -1 })
				pr.CloseWithError(io.ErrClosedPipe) // unblock the writer if the server stopped reading
				<-done
				return r
			}},
		{name: "body of 4 MiB sent chunked from a reader without a length is 413 limit_exceeded", status: 413, code: "limit_exceeded",
			send: func(t *testing.T, s setup) apiResp {
				body := io.MultiReader(strings.NewReader(`{"invite":"`+s.g.URI+`","pad":"`), io.LimitReader(zeroReader{}, 4<<20))
				return s.h.joinRaw(struct{ io.Reader }{body}, func(r *http.Request) { r.ContentLength = -1 })
			}},
		{name: "body over 1 MiB with explicit Transfer-Encoding chunked on a raw connection is 413", status: 413, code: "limit_exceeded",
			send: func(t *testing.T, s setup) apiResp { return rawChunkedJoin(t, s.h, oversizedJoin(s.g.URI)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			s := setup{h: h, g: h.Invite(map[string]any{"expires_in_minutes": 60, "max_uses": 1})}
			if tc.prep != nil {
				tc.prep(s)
			}
			before := h.Snapshot()
			r := tc.send(t, s)
			m := wantError(t, r, tc.status, tc.code)
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %q; body %s", m["field"], tc.field, r.Body)
			}
			if strings.Contains(string(r.Body), s.g.Token) {
				t.Errorf("error body echoes the invitation secret: %s", r.Body)
			}
			h.AssertUnchanged(t, before)
		})
	}
}

// rawChunkedJoin writes a join request with Transfer-Encoding: chunked by
// hand (no Content-Length at all) and reads the answer while still writing.
func rawChunkedJoin(t *testing.T, h *roomHarness, body string) apiResp {
	t.Helper()
	conn, err := net.DialTimeout("tcp", h.Ingress.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	written := make(chan struct{})
	go func() {
		defer close(written)
		w := bufio.NewWriter(conn)
		fmt.Fprintf(w, "POST /session/join HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
			h.Ingress.Listener.Addr().String())
		for len(body) > 0 {
			n := min(len(body), 32<<10)
			fmt.Fprintf(w, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
			if w.Flush() != nil {
				return // the server closed its side: expected once it has answered
			}
		}
		fmt.Fprint(w, "0\r\n\r\n")
		w.Flush()
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to a chunked join: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer body: %v", err)
	}
	conn.Close()
	<-written
	return apiResp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// TestJoinBodyLimitBoundary: a body of exactly 1 MiB is read; one byte more is 413.
func TestJoinBodyLimitBoundary(t *testing.T) {
	exact := func(uri string, extra int) string {
		pre := `{"invite":"` + uri + `","name":"edge","pad":"`
		return pre + strings.Repeat("a", (1<<20)-len(pre)-2+extra) + `"}`
	}
	t.Run("exactly 1 MiB is accepted", func(t *testing.T) {
		h := newHarness(t, "")
		g := h.Invite(nil)
		body := exact(g.URI, 0)
		if len(body) != 1<<20 {
			t.Fatalf("body is %d bytes", len(body))
		}
		wantOK(t, h.joinRaw(body))
	})
	t.Run("1 MiB and one byte is 413 and spends nothing", func(t *testing.T) {
		h := newHarness(t, "")
		g := h.Invite(nil)
		before := h.Snapshot()
		wantError(t, h.joinRaw(exact(g.URI, 1)), 413, "limit_exceeded")
		h.AssertUnchanged(t, before)
	})
}

// TestJoinConcurrent: racing joins never spend more uses than the
// invitation has; the losers get invitation_redeemed.
func TestJoinConcurrent(t *testing.T) {
	cases := []struct {
		name     string
		maxUses  int
		joiners  int
		rounds   int
		wantWins int
	}{
		{"max_uses 3 with 20 racing joins admits exactly 3", 3, 20, 1, 3},
		{"max_uses 1 with 2 racing joins admits exactly 1", 1, 2, 5, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			for round := range tc.rounds {
				g := h.Invite(map[string]any{"max_uses": tc.maxUses})
				participants := h.Count(`SELECT count(*) FROM participants`)
				sessions := h.Count(`SELECT count(*) FROM sessions`)
				start := make(chan struct{})
				type result struct {
					r   apiResp
					err error
				}
				results := make([]result, tc.joiners)
				var wg sync.WaitGroup
				for i := range tc.joiners {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						r, err := h.Send("POST", h.IngressURL("/session/join"), "",
							map[string]any{"invite": g.URI, "name": fmt.Sprintf("racer-%d-%d", round, i)})
						results[i] = result{r, err}
					}()
				}
				close(start)
				wg.Wait()
				wins, redeemed := 0, 0
				tokens := map[string]bool{}
				for i, res := range results {
					if res.err != nil {
						t.Fatalf("joiner %d: %v", i, res.err)
					}
					switch res.r.Status {
					case 200:
						wins++
						var s sessionGrant
						res.r.Into(t, &s)
						tokens[s.SessionToken] = true
					case 403:
						if code := res.r.JSON(t)["error"]; code != "invitation_redeemed" {
							t.Errorf("joiner %d: error %v, want invitation_redeemed", i, code)
						}
						redeemed++
					default:
						t.Errorf("joiner %d: %d %s", i, res.r.Status, res.r.Body)
					}
				}
				if wins != tc.wantWins || redeemed != tc.joiners-tc.wantWins || len(tokens) != tc.wantWins {
					t.Errorf("round %d: %d joins won (%d distinct tokens), %d redeemed; want %d and %d",
						round, wins, len(tokens), redeemed, tc.wantWins, tc.joiners-tc.wantWins)
				}
				if n := h.Count(`SELECT used_count FROM invites WHERE invite_id = ?`, g.InviteID); n != tc.wantWins {
					t.Errorf("used_count = %d, want %d", n, tc.wantWins)
				}
				if n := h.Count(`SELECT count(*) FROM participants`) - participants; n != tc.wantWins {
					t.Errorf("%d participants added, want %d", n, tc.wantWins)
				}
				if n := h.Count(`SELECT count(*) FROM sessions`) - sessions; n != tc.wantWins {
					t.Errorf("%d sessions added, want %d", n, tc.wantWins)
				}
			}
		})
	}
}

// TestJoinSessionCap: the 33rd live session is refused with 429 and the
// invitation's use is not spent; once a session ends the same invitation works.
func TestJoinSessionCap(t *testing.T) {
	h := newHarness(t, "")
	// Unlimited, and allowed every session of the room (the operator may
	// raise an invitation's own cap up to the room's).
	many := h.Invite(map[string]any{"max_uses": 0, "max_live_sessions": 32})
	if many.MaxUses != nil {
		t.Fatalf("max_uses 0 should be unlimited (null), got %v", *many.MaxUses)
	}
	var first party
	for i := range 32 {
		s := h.redeem(many.URI, fmt.Sprintf("agent-%d", i))
		if i == 0 {
			first = s
		}
	}
	if n := h.Count(`SELECT count(*) FROM sessions WHERE ended_at IS NULL`); n != 32 {
		t.Fatalf("%d live sessions, want 32", n)
	}
	one := h.Invite(map[string]any{"max_uses": 1})

	t.Run("33rd join is 429 limit_exceeded and spends nothing", func(t *testing.T) {
		before := h.Snapshot()
		wantError(t, h.joinRaw(map[string]any{"invite": one.URI, "name": "late"}), 429, "limit_exceeded")
		h.AssertUnchanged(t, before)
		if n := h.Count(`SELECT used_count FROM invites WHERE invite_id = ?`, one.InviteID); n != 0 {
			t.Errorf("used_count = %d after a refused join, want 0", n)
		}
	})
	t.Run("unlimited invitation is refused at the cap too", func(t *testing.T) {
		before := h.Snapshot()
		wantError(t, h.joinRaw(map[string]any{"invite": many.URI, "name": "late"}), 429, "limit_exceeded")
		h.AssertUnchanged(t, before)
	})
	t.Run("after one session leaves the unspent invitation admits", func(t *testing.T) {
		wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), first.SessionToken, nil))
		h.redeem(one.URI, "late")
		if n := h.Count(`SELECT used_count FROM invites WHERE invite_id = ?`, one.InviteID); n != 1 {
			t.Errorf("used_count = %d, want 1", n)
		}
	})
	t.Run("expired sessions do not count toward the cap, swept or not", func(t *testing.T) {
		h.Clock.Advance(8*time.Hour + time.Minute)
		fresh := h.Invite(nil)
		h.redeem(fresh.URI, "after-expiry")
		h.Sweep()
		if n := h.Count(`SELECT count(*) FROM sessions WHERE ended_at IS NULL`); n != 1 {
			t.Errorf("%d live sessions after the sweep, want 1", n)
		}
	})
}
