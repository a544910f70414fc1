package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// exposedHarness is a harness whose transport exposed the ingress as
// room.relay.example (with two IPs) on relayPort, loopback after it, as ce
// serve sets it after a plugin's Expose.
const (
	relayName = "room.relay.example"
	relayPort = 8443
)

func exposedHarness(t *testing.T) *roomHarness {
	t.Helper()
	h := newHarness(t, "")
	h.Eng.SetHints([]room.Hint{
		{Type: "exec:relay", Address: relayName, IPs: []string{"192.0.2.7", "2001:db8::7"}, Port: relayPort, Encrypted: true, Mode: "private"},
		{Type: "loopback", Address: "127.0.0.1", Port: h.Ingress.Listener.Addr().(*net.TCPAddr).Port, Mode: "local"},
	})
	return h
}

// TestExposedHostGuard: the ingress accepts exactly the names and addresses
// the transport exposed (with its port or none) and loopback; the owner
// listener accepts loopback only; every other Host and Origin is 403.
func TestExposedHostGuard(t *testing.T) {
	h := exposedHarness(t)
	agent := h.join("agent", "read")
	rp := strconv.Itoa(relayPort)
	ip := serverPort(h.Ingress)
	goodHosts := []string{relayName + ":" + rp, strings.ToUpper(relayName) + ":" + rp, relayName,
		"192.0.2.7:" + rp, "192.0.2.7", "[2001:db8::7]:" + rp, "[2001:db8::7]", "2001:db8::7", "[2001:0db8:0:0::7]:" + rp,
		"127.0.0.1:" + ip, "localhost:" + ip, "[::1]:" + ip}
	evilHosts := []string{relayName + ":1", relayName + ".", "evil." + relayName, relayName + ".evil.example", relayName + ":" + rp + ":1",
		relayName + ":x", "192.0.2.8:" + rp, "192.0.2.7:1", "[2001:db8::8]:" + rp, "[2001:db8::7]:1", "[" + relayName + "]:" + rp,
		"evil.example", "evil.example:" + rp, "127.0.0.1.evil.example:" + ip, "user@" + relayName, "relay.example:" + rp}
	goodOrigins := []string{"http://" + relayName + ":" + rp, "https://" + relayName, "HTTP://" + strings.ToUpper(relayName),
		"http://[2001:db8::7]:" + rp, "https://192.0.2.7", "http://127.0.0.1:1", "http://localhost"}
	evilOrigins := []string{"null", "", "http://evil.example", "http://" + relayName + ":1", "http://2001:db8::7", "ftp://" + relayName,
		"http://user@" + relayName, "http://" + relayName + "/", relayName, "http://" + relayName + ".evil.example"}

	status := func(t *testing.T, base, token string, opts ...reqOpt) apiResp {
		t.Helper()
		return h.Do(t, "GET", base+"/workspace/status", token, nil, opts...)
	}
	t.Run("the ingress accepts every exposed name and loopback", func(t *testing.T) {
		for _, host := range goodHosts {
			if r := status(t, h.Ingress.URL, agent.SessionToken, withHost(host)); r.Status != http.StatusOK {
				t.Errorf("Host %q: %d %s", host, r.Status, r.Body)
			}
		}
		for _, o := range goodOrigins {
			if r := status(t, h.Ingress.URL, agent.SessionToken, withHost(relayName), withHeader("Origin", o)); r.Status != http.StatusOK {
				t.Errorf("Origin %q: %d %s", o, r.Status, r.Body)
			}
		}
	})
	t.Run("the ingress refuses every other name", func(t *testing.T) {
		for _, host := range evilHosts {
			r := status(t, h.Ingress.URL, agent.SessionToken, withHost(host))
			if r.Status != http.StatusForbidden {
				t.Fatalf("Host %q: %d %s", host, r.Status, r.Body)
			}
			if m := wantError(t, r, http.StatusForbidden, "permission_denied"); !strings.Contains(m["message"].(string), "loopback") {
				t.Errorf("Host %q: the refusal does not say why: %s", host, r.Body)
			}
		}
		for _, o := range evilOrigins {
			for _, host := range []string{relayName + ":" + rp, "127.0.0.1:" + ip} {
				r := status(t, h.Ingress.URL, agent.SessionToken, withHost(host), withHeader("Origin", o))
				if r.Status != http.StatusForbidden {
					t.Errorf("Host %q Origin %q: %d %s", host, o, r.Status, r.Body)
				}
			}
		}
		r := status(t, h.Ingress.URL, agent.SessionToken, withHost(relayName), func(r *http.Request) {
			r.Header["Origin"] = []string{"http://" + relayName, "http://" + relayName}
		})
		if r.Status != http.StatusForbidden {
			t.Errorf("two Origin headers: %d", r.Status)
		}
	})
	t.Run("the owner listener accepts loopback only", func(t *testing.T) {
		if r := status(t, h.Owner.URL, h.OpToken); r.Status != http.StatusOK {
			t.Fatalf("loopback: %d %s", r.Status, r.Body)
		}
		for _, host := range goodHosts {
			if strings.Contains(host, "127.0.0.1") || strings.Contains(host, "localhost") || strings.Contains(host, "::1") {
				continue
			}
			for _, path := range []string{"/workspace/status", "/", "/debug/metrics"} {
				r := h.Do(t, "GET", h.Owner.URL+path, h.OpToken, nil, withHost(host))
				wantError(t, r, http.StatusForbidden, "permission_denied")
			}
		}
		for _, o := range goodOrigins[:5] {
			r := status(t, h.Owner.URL, h.OpToken, withHeader("Origin", o))
			wantError(t, r, http.StatusForbidden, "permission_denied")
		}
	})
	t.Run("with no transport exposed the exposed names are refused", func(t *testing.T) {
		h.Eng.SetHints([]room.Hint{{Type: "loopback", Address: "127.0.0.1", Port: 1, Mode: "local"}})
		defer h.Eng.SetHints(exposedHarness(t).Eng.Hints())
		for _, host := range []string{relayName + ":" + rp, "192.0.2.7"} {
			wantError(t, status(t, h.Ingress.URL, agent.SessionToken, withHost(host)), http.StatusForbidden, "permission_denied")
		}
	})
}

// TestJoinRecordsTheTransportItCameThrough: the room labels a session by
// the exposed name its join's Host named, loopback otherwise, whatever the
// client claims; participants and diagnostics show the label.
func TestJoinRecordsTheTransportItCameThrough(t *testing.T) {
	h := exposedHarness(t)
	rp := strconv.Itoa(relayPort)
	join := func(t *testing.T, base, name string, opts ...reqOpt) sessionGrant {
		t.Helper()
		r := h.Do(t, "POST", base+"/session/join", "", map[string]any{"invite": h.InviteCaps("read").URI, "name": name, "transport": "claimed-by-client"}, opts...)
		wantOK(t, r)
		var g sessionGrant
		r.Into(t, &g)
		return g
	}
	cases := []struct {
		name, base, host, want string
	}{
		{"by-name", h.Ingress.URL, relayName + ":" + rp, "exec:relay"},
		{"by-name-without-port", h.Ingress.URL, relayName, "exec:relay"},
		{"by-ip", h.Ingress.URL, "[2001:db8::7]:" + rp, "exec:relay"},
		{"by-loopback", h.Ingress.URL, "", "loopback"},
		{"on-the-owner-listener", h.Owner.URL, "", "loopback"},
	}
	got := map[string]string{}
	for _, c := range cases {
		t.Run(c.name+" is "+c.want, func(t *testing.T) {
			var opts []reqOpt
			if c.host != "" {
				opts = append(opts, withHost(c.host))
			}
			g := join(t, c.base, c.name, opts...)
			if g.Transport != c.want {
				t.Fatalf("transport %q, want %q", g.Transport, c.want)
			}
			got[g.ParticipantID] = c.want
		})
	}
	t.Run("participants and diagnostics show it", func(t *testing.T) {
		var ps []map[string]any
		r := h.do("GET", h.OwnerURL("/workspace/participants"), h.OpToken, nil)
		wantOK(t, r)
		r.Into(t, &ps)
		seen := 0
		for _, p := range ps {
			if want, ok := got[p["participant_id"].(string)]; ok {
				seen++
				if p["transport"] != want {
					t.Errorf("%v: transport %v, want %s", p["name"], p["transport"], want)
				}
			}
		}
		if seen != len(cases) {
			t.Fatalf("saw %d of %d joiners in %v", seen, len(cases), ps)
		}
		var d room.Diagnostics
		r = h.do("GET", h.OwnerURL("/workspace/diagnostics"), h.OpToken, nil)
		wantOK(t, r)
		r.Into(t, &d)
		n := 0
		for _, p := range d.Participants {
			if p.Transport != nil && *p.Transport == "exec:relay" {
				n++
			}
		}
		if n != 3 {
			t.Errorf("diagnostics: %d participants over exec:relay, want 3: %+v", n, d.Participants)
		}
	})
}

// TestDiagnosticsDescribeTheTransport: the host reads the exposed hint's
// line with its endpoint (the owner page's Connection line shows it); a
// participant the same line without it.
func TestDiagnosticsDescribeTheTransport(t *testing.T) {
	h := exposedHarness(t)
	agent := h.join("agent", "read")
	want := "exec:relay (private, encrypted) " + relayName + ":8443"
	var d room.Diagnostics
	r := h.do("GET", h.OwnerURL("/workspace/diagnostics"), h.OpToken, nil)
	wantOK(t, r)
	r.Into(t, &d)
	if d.Listener.Describe != want || d.Listener.Type != "exec:relay" || !d.Listener.Encrypted {
		t.Errorf("host: %+v", d.Listener)
	}
	r = h.do("GET", h.IngressURL("/workspace/diagnostics"), agent.SessionToken, nil)
	wantOK(t, r)
	r.Into(t, &d)
	if d.Listener.Describe != "exec:relay (private, encrypted)" || strings.Contains(string(r.Body), relayName) || strings.Contains(string(r.Body), "8443") {
		t.Errorf("participant: %s", r.Body)
	}
	_, cookie := h.pageCookie(t)
	page := h.do("GET", h.OwnerURL("/"), "", nil, withCookie(cookie))
	wantOK(t, page)
	if !strings.Contains(string(page.Body), `<p id="connection">`+want+`</p>`) {
		t.Errorf("the owner page's Connection line is not %q", want)
	}
}
