package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestIsLoopbackHost(t *testing.T) {
	cases := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.0.0.1:1", true},
		{"127.0.0.1:65535", true},
		{"[::1]", true},
		{"[::1]:8080", true},
		{"::1", true},

		{"", false},
		{"evil.example.com", false},
		{"evil.example.com:8080", false},
		{"127.0.0.1.evil.example.com", false},
		{"127.0.0.1.evil.example.com:8080", false},
		{"localhost.evil", false},
		{"localhost.evil:8080", false},
		{"localhost.", false},
		{"evil.localhost", false},
		{"xlocalhost", false},
		{"127.0.0.2", false},
		{"127.1", false},
		{"0.0.0.0", false},
		{"2130706433", false},
		{"localhost:", false},
		{"localhost:http", false},
		{"localhost:123456", false},
		{"localhost:80:80", false},
		{"localhost@evil.example.com", false},
		{"[::1", false},
		{"[::1]8080", false},
		{"[::1]:", false},
		{"::1:8080", false},
		{"[::2]", false},
		{"[0:0:0:0:0:0:0:1]", false},
		{"[::ffff:127.0.0.1]", false},
		{"[::1%25eth0]", false},
		{"::1]", false},
		{" localhost", false},
	}
	for _, tc := range cases {
		name := "rejects " + tc.host
		if tc.want {
			name = "accepts " + tc.host
		}
		t.Run(name, func(t *testing.T) {
			if got := IsLoopbackHost(tc.host); got != tc.want {
				t.Errorf("IsLoopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

func TestIsLoopbackOrigin(t *testing.T) {
	cases := []struct {
		origin string
		want   bool
	}{
		{"http://localhost", true},
		{"http://localhost:3000", true},
		{"https://localhost:3000", true},
		{"HTTP://LOCALHOST:3000", true},
		{"http://127.0.0.1", true},
		{"http://127.0.0.1:8080", true},
		{"https://127.0.0.1:8443", true},
		{"http://[::1]", true},
		{"http://[::1]:8080", true},
		{"https://[::1]:8080", true},

		{"", false},
		{"null", false},
		{"NULL", false},
		{"localhost", false},
		{"localhost:8080", false},
		{"//localhost", false},
		{"http://", false},
		{"http://evil.example.com", false},
		{"https://evil.example.com:8080", false},
		{"http://127.0.0.1.evil.example.com", false},
		{"http://localhost.evil", false},
		{"http://localhost.evil:3000", false},
		{"http://evil.localhost", false},
		{"http://localhost/", false},
		{"http://localhost:3000/path", false},
		{"http://user@localhost", false},
		{"http://localhost@evil.example.com", false},
		{"http://::1", false},
		{"http://::1:8080", false},
		{"http://[::2]", false},
		{"ftp://localhost", false},
		{"file://localhost", false},
		{"ws://localhost", false},
		{"chrome-extension://abcdef", false},
		{"http://localhost:", false},
		{"http:/localhost", false},
	}
	for _, tc := range cases {
		name := "rejects " + tc.origin
		if tc.want {
			name = "accepts " + tc.origin
		}
		t.Run(name, func(t *testing.T) {
			if got := IsLoopbackOrigin(tc.origin); got != tc.want {
				t.Errorf("IsLoopbackOrigin(%q) = %v, want %v", tc.origin, got, tc.want)
			}
		})
	}
}

func TestLoopbackOnly(t *testing.T) {
	reject := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"forbidden"}}`)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	h := LoopbackOnly(reject)(next)

	cases := []struct {
		name    string
		host    string
		origins []string // nil = no Origin header
		want    int
	}{
		{"passes/no Origin from 127.0.0.1", "127.0.0.1:8080", nil, 200},
		{"passes/no Origin from localhost", "localhost:8080", nil, 200},
		{"passes/no Origin from [::1]", "[::1]:8080", nil, 200},
		{"passes/loopback Origin", "127.0.0.1:8080", []string{"http://127.0.0.1:8080"}, 200},
		{"passes/Origin on another loopback port", "127.0.0.1:8080", []string{"http://localhost:3000"}, 200},
		{"passes/upper-case host", "LOCALHOST:8080", []string{"HTTP://LOCALHOST:8080"}, 200},
		{"forbidden/evil Host and Origin (CONF dns-rebinding)", "evil.example.com", []string{"http://evil.example.com"}, 403},
		{"forbidden/evil Host without Origin", "evil.example.com:8080", nil, 403},
		{"forbidden/rebinding name that starts with 127.0.0.1", "127.0.0.1.evil.example.com:8080", nil, 403},
		{"forbidden/evil Origin on a loopback Host", "127.0.0.1:8080", []string{"http://evil.example.com"}, 403},
		{"forbidden/Origin null", "127.0.0.1:8080", []string{"null"}, 403},
		{"forbidden/empty Origin", "127.0.0.1:8080", []string{""}, 403},
		{"forbidden/two Origin headers", "127.0.0.1:8080", []string{"http://127.0.0.1:8080", "http://evil.example.com"}, 403},
		{"forbidden/two loopback Origin headers", "127.0.0.1:8080", []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080"}, 403},
		{"forbidden/empty Host", "", nil, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
			r.Host = tc.host
			if tc.origins != nil {
				r.Header["Origin"] = tc.origins
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d", rec.Code, tc.want)
			}
			if tc.want == 200 && rec.Body.String() != "ok" {
				t.Errorf("next handler not reached: %q", rec.Body.String())
			}
			if tc.want == 403 {
				if rec.Body.String() == "ok" {
					t.Errorf("next handler ran on a rejected request")
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("onReject's Content-Type lost: %q", ct)
				}
			}
		})
	}
}

func TestLoopbackOnlyAlways403(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	cases := []struct {
		name     string
		onReject func(http.ResponseWriter, *http.Request)
		wantBody string
	}{
		{"reject status/nil onReject is a plain 403", nil, "forbidden"},
		{"reject status/onReject asking for 401 still sends 403", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "nope")
		}, "nope"},
		{"reject status/onReject writing only a body sends 403", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "body only")
		}, "body only"},
		{"reject status/onReject writing nothing sends 403", func(w http.ResponseWriter, r *http.Request) {}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = "evil.example.com"
			rec := httptest.NewRecorder()
			LoopbackOnly(tc.onReject)(next).ServeHTTP(rec, r)
			if rec.Code != http.StatusForbidden {
				t.Errorf("status = %d, want 403", rec.Code)
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) || (tc.wantBody == "" && rec.Body.Len() != 0) {
				t.Errorf("body = %q, want %q", rec.Body.String(), tc.wantBody)
			}
		})
	}
}

// Through a real server: the Host header a client sends is what r.Host holds.
func TestLoopbackOnlyOverHTTP(t *testing.T) {
	reached := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := httptest.NewServer(LoopbackOnly(nil)(reached))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	probe := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`
	hdrs := []string{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: server/discover"}

	t.Run("over HTTP/loopback Host and Origin reach the handler", func(t *testing.T) {
		resp, body := rawPOSTHost(t, addr, addr, append(hdrs, "Origin: http://"+addr), probe)
		if resp.StatusCode != 200 {
			t.Errorf("status %d body %s", resp.StatusCode, body)
		}
	})
	t.Run("over HTTP/evil Host is 403", func(t *testing.T) {
		resp, body := rawPOSTHost(t, addr, "evil.example.com", append(hdrs, "Origin: http://evil.example.com"), probe)
		if resp.StatusCode != 403 {
			t.Errorf("status %d body %s", resp.StatusCode, body)
		}
	})
}

// rawPOSTHost POSTs body to /mcp with a chosen Host header.
func rawPOSTHost(t *testing.T, addr, host string, headerLines []string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for _, l := range headerLines {
		k, v, _ := strings.Cut(l, ":")
		req.Header.Add(k, strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
