package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestCheckMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		why        string // "" accepted; else a word the refusal must hold
	}{
		{"none is accepted (the listener is off)", "", ""},
		{"IPv4 loopback is accepted", "127.0.0.1:9464", ""},
		{"another loopback address is accepted", "127.0.0.2:9464", ""},
		{"IPv6 loopback is accepted", "[::1]:9464", ""},
		{"localhost is accepted", "localhost:9464", ""},
		{"an overlay network address is accepted", "100.101.102.103:9464", ""},
		{"an overlay IPv6 address is accepted", "[fd7a:115c:a1e0::1]:9464", ""},
		{"every interface is refused", "0.0.0.0:9464", "every interface"},
		{"every IPv6 interface is refused", "[::]:9464", "every interface"},
		{"an empty host is refused", ":9464", "every interface"},
		{"a public address is refused", "8.8.8.8:9464", "public address"},
		{"a public IPv6 address is refused", "[2001:4860::1]:9464", "public address"},
		{"a LAN address is refused", "192.168.1.20:9464", "local network"},
		{"a link-local address is refused", "169.254.1.1:9464", "link-local"},
		{"just outside the overlay range is refused", "100.128.0.1:9464", "public address"},
		{"a host name is refused", "metrics.example.com:9464", "host name"},
		{"no port is refused", "127.0.0.1", "bad address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMetricsAddr(tc.addr)
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("checkMetricsAddr(%q) = %v, want accepted", tc.addr, err)
			case tc.why != "" && err == nil:
				t.Fatalf("checkMetricsAddr(%q) accepted, want refused for %q", tc.addr, tc.why)
			case tc.why != "" && !strings.Contains(err.Error(), tc.why):
				t.Fatalf("checkMetricsAddr(%q) = %q, want it to say %q", tc.addr, err, tc.why)
			}
		})
	}
}

// TestServeMetricsAddr: a public --metrics-addr is a usage error naming why,
// before anything is created; a loopback one serves /metrics and
// readiness to a scraper with no credential, and nothing else.
func TestServeMetricsAddr(t *testing.T) {
	t.Parallel()
	newDir := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("a public address is refused, naming why, and nothing is created", func(t *testing.T) {
		t.Parallel()
		dir := newDir(t)
		r := ceWithin(t, fileTimeout, dir, nil, "serve", "notes.md", "--json", "--metrics-addr", "0.0.0.0:9464")
		if r.code != exitUsage {
			t.Fatalf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
		}
		if !strings.Contains(r.stderr, "every interface") || !strings.Contains(r.stderr, "no credential") {
			t.Errorf("the refusal does not say why: %q", r.stderr)
		}
		if exists(filepath.Join(dir, "notes.md.commonroom.db")) {
			t.Error("a refused serve created a sidecar")
		}
	})
	t.Run("a loopback address serves metrics and readiness only", func(t *testing.T) {
		t.Parallel()
		dir := newDir(t)
		s := startServe(t, dir, "serve", "notes.md", "--json", "--metrics-addr", "127.0.0.1:0")
		var ready struct {
			MetricsURL string `json:"metrics_url"`
		}
		if err := json.Unmarshal([]byte(s.Line), &ready); err != nil || !strings.HasPrefix(ready.MetricsURL, "http://127.0.0.1:") {
			t.Fatalf("the ready line has no metrics_url: %s", s.Line)
		}
		code, body := httpDo(t, "GET", ready.MetricsURL, "", nil)
		if code != 200 {
			t.Fatalf("GET /metrics on the metrics listener: %d %.200s", code, body)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("not Prometheus text: %v", err)
		}
		for _, name := range []string{"ce_writer_commands_total", "ce_sessions_live", "ce_ready", "go_goroutines"} {
			if fams[name] == nil {
				t.Errorf("no family %s", name)
			}
		}
		base := strings.TrimSuffix(ready.MetricsURL, "/metrics")
		if code, body := httpDo(t, "GET", base+"/readyz", "", nil); code != 200 {
			t.Errorf("/readyz: %d %s", code, body)
		}
		if code, _ := httpDo(t, "GET", base+"/debug/metrics", "", nil); code != 404 {
			t.Errorf("/debug/metrics on the metrics listener: %d, want 404", code)
		}
		owner, _, _ := strings.Cut(s.Banner.OwnerURL, "/?")
		if code, _ := httpDo(t, "GET", owner+"/metrics", "", nil); code != 401 {
			t.Errorf("/metrics on the owner listener without the credential: %d, want 401", code)
		}
	})
}

// The transport check of /readyz: a transport whose own listener the room
// serves is down once that listener stopped; loopback has no check.
func TestServeTransportUp(t *testing.T) {
	var a serveApp
	if a.transportUp() != nil {
		t.Fatal("loopback (no transport listener) has a transport check")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a.transportLn = ln
	up := a.transportUp()
	if err := up(); err != nil {
		t.Fatalf("a served transport listener is down: %v", err)
	}
	a.transportStopped.Store(true)
	if err := up(); err == nil {
		t.Fatal("a stopped transport listener is up")
	}
}
