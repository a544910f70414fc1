package httpapi

// Every connection ends within a bounded time whatever its handler does:
// request bodies left unread, answers never read, floods of connections,
// request targets that are not paths. These tests run real listeners with
// short configured timeouts and wait for the server to act with generous
// upper bounds; they assert that it acts, never how fast.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serverWait is the generous upper bound for the server to act on a deadline.
const serverWait = 20 * time.Second

// waitFor polls cond until it holds, failing t after serverWait.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(serverWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, serverWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idleConns closes the harness client's pooled connections and waits until the
// server holds none on either listener, so the counts a test reads are its own.
func idleConns(t testing.TB, h *roomHarness) {
	t.Helper()
	h.client.CloseIdleConnections()
	waitFor(t, "the harness's idle connections are closed", func() bool {
		return h.API.ingressConns.open.Load() == 0 && h.API.ownerConns.open.Load() == 0
	})
}

// dial opens a raw connection to a test server.
func dial(t testing.TB, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readToEnd reads c until the server closes it; it fails t if the
// connection is still open after serverWait.
func readToEnd(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(serverWait))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection after %v (read %d bytes: %.200q)", serverWait, len(b), b)
	}
	return b // io.EOF or a reset: the server closed it
}

func TestBoundsUnreadBodyClosesConnection(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.BodyReadTimeout = 300 * time.Millisecond }})
	for _, l := range []struct{ name, url string }{{"owner", h.Owner.URL}, {"ingress", h.Ingress.URL}} {
		for _, tc := range []struct {
			name, method, path string
			framing            string // the body's headers
			partial            string // what is sent of it
			status             int
		}{
			{"GET /healthz with half a Content-Length body", "GET", "/healthz", "Content-Length: 100\r\n", strings.Repeat("x", 50), 200},
			{"GET /healthz with an unfinished chunked body", "GET", "/healthz", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n", 200},
			{"POST /workspace/checkout without a session, half a Content-Length body", "POST", "/workspace/checkout", "Content-Length: 100\r\nContent-Type: application/json\r\n", `{"target":`, 401},
			{"POST /workspace/checkout without a session, an unfinished chunked body", "POST", "/workspace/checkout", "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n", "a\r\n{\"target\":\r\n", 401},
			// net/http answers OPTIONS * itself unless told not to, reading
			// its body with no deadline.
			{"OPTIONS * with half a Content-Length body", "OPTIONS", "*", "Content-Length: 100\r\n", strings.Repeat("x", 50), 400},
		} {
			t.Run(l.name+": "+tc.name+": answered, then closed by the server", func(t *testing.T) {
				c := dial(t, l.url)
				fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n%s", tc.method, tc.path, tc.framing, tc.partial)
				got := readToEnd(t, c)
				res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
				if err != nil {
					t.Fatalf("no HTTP answer before the close: %v (%q)", err, got)
				}
				res.Body.Close()
				if res.StatusCode != tc.status {
					t.Errorf("status %d, want %d", res.StatusCode, tc.status)
				}
				if !res.Close {
					t.Errorf("the answer does not say Connection: close: %v", res.Header)
				}
			})
		}
	}
	waitFor(t, "every connection is given back", func() bool {
		return h.API.ingressConns.open.Load() == 0 && h.API.ownerConns.open.Load() == 0
	})
	t.Run("a request whose body is read whole keeps its connection", func(t *testing.T) {
		c := dial(t, h.Ingress.URL)
		br := bufio.NewReader(c)
		for i := range 2 {
			body := `{"invite":"nope","name":"x"}`
			fmt.Fprintf(c, "POST /session/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			c.SetReadDeadline(time.Now().Add(serverWait))
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode >= 500 || res.Close {
				t.Fatalf("request %d: %d close=%v, want an error answer on a kept connection", i, res.StatusCode, res.Close)
			}
		}
	})
}

func TestBoundsAbsoluteFormRefused(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("reader", "read")
	for _, l := range []struct{ name, url string }{{"owner", h.Owner.URL}, {"ingress", h.Ingress.URL}} {
		port := strings.TrimPrefix(l.url, "http://127.0.0.1:")
		for _, tc := range []struct{ name, head string }{
			{"absolute URL with an evil Host header",
				"GET http://127.0.0.1:" + port + "/healthz HTTP/1.1\r\nHost: evil.example\r\n"},
			{"absolute URL naming loopback, with a session",
				"GET http://127.0.0.1:" + port + "/workspace/status HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer " + s.SessionToken + "\r\n"},
			{"absolute URL naming another host",
				"GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"},
			{"authority form",
				"CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n"},
			{"asterisk form",
				"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n"},
		} {
			t.Run(l.name+": "+tc.name+": 400 without an echo", func(t *testing.T) {
				c := dial(t, l.url)
				io.WriteString(c, tc.head+"\r\n")
				c.SetReadDeadline(time.Now().Add(serverWait))
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusBadRequest {
					t.Fatalf("status %d, want 400; body %s", res.StatusCode, b)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil || m["error"] != "invalid_request" {
					t.Errorf("body %s, want an invalid_request error", b)
				}
				for _, echo := range []string{"evil", "healthz", "status", port} {
					if strings.Contains(string(b), echo) {
						t.Errorf("the refusal echoes %q: %s", echo, b)
					}
				}
			})
		}
	}
	t.Run("origin-form requests are served", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
	})
}

func TestBoundsConnectionCap(t *testing.T) {
	const capN = 3
	// The policy's clock stands still: the held requests below never count
	// as stalled, so nothing can be reclaimed for a newcomer.
	clock := newFakeClock()
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.MaxConns, c.OwnerMaxConns, c.ConnClock = capN, capN, clock.Now }})
	type side struct {
		name string
		url  string
		lim  *connPolicy
	}
	owner := side{"owner", h.Owner.URL, h.API.ownerConns}
	ingress := side{"ingress", h.Ingress.URL, h.API.ingressConns}
	for _, tc := range []struct{ full, other side }{{ingress, owner}, {owner, ingress}} {
		t.Run(tc.full.name+" full of requests in progress: the next connection is refused, the "+tc.other.name+" listener answers", func(t *testing.T) {
			idleConns(t, h)
			refusedBefore := tc.full.lim.refused.Load()
			held := make([]net.Conn, capN)
			for i := range held {
				held[i] = dial(t, tc.full.url)
				io.WriteString(held[i], "POST /session/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"invite\":")
			}
			waitFor(t, "every held connection has a request in progress", func() bool { return tc.full.lim.classes()[unauthBusy] == capN })
			over := dial(t, tc.full.url)
			io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			got := readToEnd(t, over) // closed at once: never left waiting in the backlog
			if bytes.Contains(got, []byte(" 200 ")) {
				t.Fatalf("the connection over the cap was served: %q", got)
			}
			if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 503 ")) {
				t.Errorf("the connection over the cap got %q, want a 503 or nothing", got)
			}
			if n := tc.full.lim.refused.Load() - refusedBefore; n != 1 {
				t.Errorf("%d refusals counted, want 1", n)
			}
			if n := tc.full.lim.open.Load(); n != capN {
				t.Errorf("%d connections counted, want the %d held", n, capN)
			}

			r, err := http.Get(tc.other.url + "/healthz")
			if err != nil || r.StatusCode != 200 {
				t.Fatalf("the %s listener while the %s is full: %v %v", tc.other.name, tc.full.name, err, r)
			}
			r.Body.Close()

			held[0].Close()
			waitFor(t, "a closed connection gives its slot back", func() bool { return tc.full.lim.open.Load() < capN })
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			r, err = c.Get(tc.full.url + "/healthz")
			if err != nil || r.StatusCode != 200 {
				t.Fatalf("a new connection once a slot is free: %v %v", err, r)
			}
			r.Body.Close()
			for _, c := range held {
				c.Close()
			}
		})
	}
	t.Run("refusals are counted in /debug/metrics", func(t *testing.T) {
		idleConns(t, h)
		r := h.do("GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
		wantOK(t, r)
		var m struct {
			Connections map[string]ConnStats `json:"connections"`
		}
		r.Into(t, &m)
		for _, name := range []string{"owner", "ingress"} {
			if s := m.Connections[name]; s.Max != capN || s.Refused != 1 {
				t.Errorf("connections.%s = %+v, want max %d and 1 refusal", name, s, capN)
			}
		}
	})
}

func TestBoundsStreamsOutliveDeadlines(t *testing.T) {
	const deadline = 200 * time.Millisecond
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.BodyReadTimeout, c.WriteTimeout = deadline, deadline }})
	agent := h.join("agent", agentCaps...)
	tok := agent.SessionToken
	doc := h.Eng.DocumentURI()

	listen, _ := h.listenURIs(t, tok, 1, []string{doc})
	observe, r := h.observe(t, tok, "")
	if observe == nil {
		t.Fatalf("observe: %d %s", r.Status, r.Body)
	}
	newMCPClient(h, tok, false).ok(t, "resources/subscribe", map[string]any{"uri": doc})
	legacy, lr := h.LegacyGet(t, streamClient(), tok, "text/event-stream")
	if legacy == nil {
		t.Fatalf("GET /mcp: %d %s", lr.Status, lr.Raw)
	}
	legacy.Start()

	// Real network deadlines: let both lapse several times over.
	time.Sleep(10 * deadline)
	h.EditFile(t, tok, threeSections("hello world, later", "ship it\nsoon", "step one"))

	t.Run("a subscriptions/listen stream is not cut by the body or write deadline", func(t *testing.T) {
		f := listen.Next(t)
		if f.Msg.Method != "notifications/resources/updated" || jsonAt(f.Params(), "uri") != doc {
			t.Fatalf("frame %.300s, want resources/updated for %s", string(f.Data), doc)
		}
	})
	t.Run("a GET /workspace/observe stream is not cut", func(t *testing.T) {
		if f := observe.Next(t); f.Msg.Method != "notifications/commonroom/event" {
			t.Fatalf("frame %.300s, want an event", string(f.Data))
		}
	})
	t.Run("a GET /mcp stream is not cut", func(t *testing.T) {
		legacy.ExpectRes(t, doc)
	})
}
