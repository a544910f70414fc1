package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/room"
)

// families parses a /metrics answer with Prometheus' own text parser: what
// a real scraper would accept is what the test reads.
func families(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v\n%.2000s", err, body)
	}
	return fams
}

// scrape is GET /metrics on the owner listener with the operator's credential.
func (h *roomHarness) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	r := h.Do(t, "GET", h.OwnerURL("/metrics"), h.OpToken, nil)
	if r.Status != 200 {
		t.Fatalf("GET /metrics: %d %.300s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics Content-Type %q, want the text format", ct)
	}
	return families(t, r.Body)
}

// sample finds the series of family name whose labels include want (in
// "k=v" pairs); ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want ...string) (m *dto.Metric, ok bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value is a counter's or gauge's value, or a histogram's count; 0 when the
// series is absent.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m, ok := sample(fams, name, labels...)
	switch {
	case !ok:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestPrometheusFamiliesMoveWithALifecycle(t *testing.T) {
	h := newHarness(t, "")
	before := h.scrape(t)

	wantFamilies := map[string]dto.MetricType{
		"ce_writer_commands_total":              dto.MetricType_COUNTER,
		"ce_writer_commands_failed_total":       dto.MetricType_COUNTER,
		"ce_writer_batches_total":               dto.MetricType_COUNTER,
		"ce_writer_overloaded_total":            dto.MetricType_COUNTER,
		"ce_writer_sweeps_total":                dto.MetricType_COUNTER,
		"ce_writer_cpu_seconds_total":           dto.MetricType_COUNTER,
		"ce_writer_queue_depth":                 dto.MetricType_GAUGE,
		"ce_writer_commit_duration_seconds":     dto.MetricType_HISTOGRAM,
		"ce_writer_batch_commands":              dto.MetricType_HISTOGRAM,
		"ce_tasks_live":                         dto.MetricType_GAUGE,
		"ce_sessions_live":                      dto.MetricType_GAUGE,
		"ce_events_in_ring":                     dto.MetricType_GAUGE,
		"ce_streams":                            dto.MetricType_GAUGE,
		"ce_stream_drops_total":                 dto.MetricType_COUNTER,
		"ce_stream_ends_total":                  dto.MetricType_COUNTER,
		"ce_stream_frames_delivered_total":      dto.MetricType_COUNTER,
		"ce_connections_open":                   dto.MetricType_GAUGE,
		"ce_connections_refused_total":          dto.MetricType_COUNTER,
		"ce_sidecar_bytes":                      dto.MetricType_GAUGE,
		"ce_ready":                              dto.MetricType_GAUGE,
		"mcp_server_operation_duration_seconds": dto.MetricType_HISTOGRAM,
		"http_server_request_duration_seconds":  dto.MetricType_HISTOGRAM,
		"go_goroutines":                         dto.MetricType_GAUGE,
		"go_memstats_heap_alloc_bytes":          dto.MetricType_GAUGE,
	}
	if runtime.GOOS == "linux" {
		wantFamilies["process_open_fds"] = dto.MetricType_GAUGE
		wantFamilies["process_cpu_seconds_total"] = dto.MetricType_COUNTER
	}

	owner := h.join("owner", "read", "propose", "commit")
	worker := h.join("worker", "read", "checkout")
	approver := h.join("approver", "read", "approve")
	mid := h.scrape(t)

	_, hid := owner.mcp.createTask(t, map[string]any{"summary": "count me"})
	working := h.scrape(t)
	worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
	worker.mcp.toolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "done"}})
	p := owner.mcp.toolOK(t, "workspace_propose", numberedProposal(1))
	pid, _ := p["proposal_id"].(string)
	approver.mcp.toolOK(t, "workspace_review", map[string]any{"proposal_id": pid, "approve": true})
	owner.mcp.toolOK(t, "workspace_commit", map[string]any{"proposal_id": pid})
	worker.mcp.toolErr(t, "handoff_accept", map[string]any{"handoff_id": "h_nosuch"}, "handoff_not_found")
	wantRPCError(t, owner.mcp.call(t, "no/such", nil), 404, -32601)
	wantOK(t, h.Do(t, "GET", h.OwnerURL("/workspace/status"), h.OpToken, nil))
	wantOK(t, h.Do(t, "GET", h.IngressURL("/workspace/status"), worker.SessionToken, nil))
	const strayPath = "/no/such/path-ses_secretlooking"
	if r := h.Do(t, "GET", h.IngressURL(strayPath), "", nil); r.Status != 404 {
		t.Fatalf("GET %s: %d, want 404", strayPath, r.Status)
	}
	after := h.scrape(t)

	t.Run("every family is there with its type", func(t *testing.T) {
		for name, typ := range wantFamilies {
			f := after[name]
			if f == nil {
				t.Errorf("no family %s", name)
				continue
			}
			if f.GetType() != typ {
				t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
			}
		}
	})
	t.Run("joins show as live sessions", func(t *testing.T) {
		if b, m := value(before, "ce_sessions_live"), value(mid, "ce_sessions_live"); m != b+3 {
			t.Errorf("ce_sessions_live %v → %v across three joins, want +3", b, m)
		}
	})
	t.Run("a handoff shows as a working task until it completes", func(t *testing.T) {
		w0, w1, w2 := value(mid, "ce_tasks_live", "status=working"), value(working, "ce_tasks_live", "status=working"), value(after, "ce_tasks_live", "status=working")
		if w1 != w0+1 || w2 != w0 {
			t.Errorf("ce_tasks_live{status=working} %v → %v (created) → %v (completed), want +1 then back", w0, w1, w2)
		}
		if _, ok := sample(after, "ce_tasks_live", "status=input_required"); !ok {
			t.Error("no ce_tasks_live{status=input_required} series")
		}
	})
	t.Run("the writer's counters and histograms move with the writes", func(t *testing.T) {
		// Six writes through the writer: create, accept, complete, propose, review, commit.
		if b, a := value(mid, "ce_writer_commands_total"), value(after, "ce_writer_commands_total"); a < b+6 {
			t.Errorf("ce_writer_commands_total %v → %v, want at least +6", b, a)
		}
		for _, name := range []string{"ce_writer_batches_total", "ce_writer_commit_duration_seconds", "ce_writer_batch_commands"} {
			if b, a := value(mid, name), value(after, name); a < b+6 {
				t.Errorf("%s %v → %v, want at least +6 (one batch per sequential write)", name, b, a)
			}
		}
		m, _ := sample(after, "ce_writer_commit_duration_seconds")
		if m.GetHistogram().GetSampleSum() <= 0 {
			t.Errorf("commits took no time in sum: %v", m)
		}
		if runtime.GOOS == "linux" && value(after, "ce_writer_cpu_seconds_total") <= value(before, "ce_writer_cpu_seconds_total") {
			t.Error("the writer's CPU did not grow across the lifecycle")
		}
	})
	t.Run("each tool call is counted under its method, tool and outcome", func(t *testing.T) {
		for _, c := range []struct {
			tool, errType string
		}{
			{"handoff_create", ""}, {"handoff_complete", ""}, {"workspace_propose", ""}, {"workspace_review", ""},
			{"workspace_commit", ""}, {"handoff_accept", "tool_error"},
		} {
			got := value(after, "mcp_server_operation_duration_seconds", "mcp_method_name=tools/call", "gen_ai_tool_name="+c.tool, "error_type="+c.errType)
			if got != 1 {
				t.Errorf("tools/call %s error_type=%q counted %v times, want 1", c.tool, c.errType, got)
			}
		}
		if got := value(after, "mcp_server_operation_duration_seconds", "mcp_method_name=tools/call", "gen_ai_tool_name=handoff_accept", "error_type="); got != 1 {
			t.Errorf("the successful handoff_accept counted %v times, want 1", got)
		}
		if got := value(after, "mcp_server_operation_duration_seconds", "mcp_method_name=other", "error_type=-32601"); got != 1 {
			t.Errorf("an unknown method counted %v times under other/-32601, want 1", got)
		}
	})
	t.Run("each HTTP request is counted under its route, status and listener", func(t *testing.T) {
		for _, c := range []struct {
			labels  []string
			atLeast float64
		}{
			{[]string{"http_request_method=GET", "http_route=/workspace/status", "http_response_status_code=200", "listener=owner"}, 1},
			{[]string{"http_request_method=GET", "http_route=/workspace/status", "http_response_status_code=200", "listener=ingress"}, 1},
			{[]string{"http_request_method=POST", "http_route=/mcp", "http_response_status_code=200", "listener=ingress"}, 6},
			{[]string{"http_request_method=POST", "http_route=/mcp", "http_response_status_code=404", "listener=ingress"}, 1},
			{[]string{"http_request_method=GET", "http_route=", "http_response_status_code=404", "listener=ingress"}, 1},
		} {
			d := value(after, "http_server_request_duration_seconds", c.labels...) - value(mid, "http_server_request_duration_seconds", c.labels...)
			if d < c.atLeast {
				t.Errorf("http_server_request_duration_seconds{%s} grew by %v, want at least %v", strings.Join(c.labels, ","), d, c.atLeast)
			}
		}
		for _, m := range after["http_server_request_duration_seconds"].GetMetric() {
			for _, l := range m.Label {
				if strings.Contains(l.GetValue(), "no/such") || strings.Contains(l.GetValue(), "ses_") {
					t.Errorf("a raw path reached a label: %s=%q", l.GetName(), l.GetValue())
				}
			}
		}
	})
	t.Run("streams, drops, connections and the sidecar are reported", func(t *testing.T) {
		for _, why := range []string{"queue_full", "slow"} {
			if _, ok := sample(after, "ce_stream_drops_total", "reason="+why); !ok {
				t.Errorf("no ce_stream_drops_total{reason=%s}", why)
			}
		}
		for _, l := range []string{"owner", "ingress"} {
			if value(after, "ce_connections_open", "listener="+l) < 1 {
				t.Errorf("ce_connections_open{listener=%s} < 1 while this test holds one", l)
			}
			for _, why := range []string{"cap", "peer_share"} {
				if _, ok := sample(after, "ce_connections_refused_total", "listener="+l, "reason="+why); !ok {
					t.Errorf("no ce_connections_refused_total{listener=%s,reason=%s}", l, why)
				}
			}
		}
		db, err := os.Stat(room.SidecarPath(h.Eng.DocPath))
		if err != nil {
			t.Fatal(err)
		}
		if got := value(after, "ce_sidecar_bytes", "file=db"); got != float64(db.Size()) {
			t.Errorf("ce_sidecar_bytes{file=db} = %v, want the file's %d", got, db.Size())
		}
		if value(after, "ce_sidecar_bytes", "file=wal") <= 0 {
			t.Error("ce_sidecar_bytes{file=wal} is 0 after commits")
		}
		if value(after, "ce_ready") != 1 {
			t.Error("ce_ready is not 1 in a running room")
		}
	})
}

func TestPrometheusScrapeNeedsTheOperator(t *testing.T) {
	h := newHarness(t, "")
	guest := h.join("guest", "read", "admin")
	cases := []struct {
		name   string
		url    string
		token  string
		status int
	}{
		{"the operator scrapes", h.OwnerURL("/metrics"), h.OpToken, 200},
		{"no credential is unauthorized", h.OwnerURL("/metrics"), "", 401},
		{"a wrong credential is unauthorized", h.OwnerURL("/metrics"), "not-the-operator-token", 401},
		{"an admin session is refused", h.OwnerURL("/metrics"), guest.SessionToken, 403},
		{"the ingress listener has no /metrics", h.IngressURL("/metrics"), guest.SessionToken, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.Do(t, "GET", c.url, c.token, nil)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %.200s", r.Status, c.status, r.Body)
			}
			if c.status != 200 && bytes.Contains(r.Body, []byte("ce_writer")) {
				t.Fatalf("a refused scrape carries metrics: %.200s", r.Body)
			}
		})
	}
}

// readyz reads /readyz on the listener at base.
func (h *roomHarness) readyz(t testing.TB, base string) (int, map[string]any) {
	t.Helper()
	r := h.Do(t, "GET", base+"/readyz", "", nil)
	return r.Status, r.JSON(t)
}

func TestReadyzSaysWhyTheRoomCannotServe(t *testing.T) {
	t.Run("a running room is ready on both listeners", func(t *testing.T) {
		h := newHarness(t, "")
		for _, base := range []string{h.Owner.URL, h.Ingress.URL} {
			if st, body := h.readyz(t, base); st != 200 || body["status"] != "ready" {
				t.Errorf("%s/readyz = %d %v, want 200 ready", base, st, body)
			}
		}
	})
	t.Run("a stopped writer is not ready, and healthz stays live", func(t *testing.T) {
		h := newHarness(t, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Room.Close(ctx); err != nil {
			t.Fatal(err)
		}
		st, body := h.readyz(t, h.Owner.URL)
		if st != 503 || body["reason"] != "writer" {
			t.Errorf("/readyz after the writer stopped = %d %v, want 503 writer", st, body)
		}
		if r := h.Do(t, "GET", h.OwnerURL("/healthz"), "", nil); r.Status != 200 {
			t.Errorf("/healthz = %d, want 200: liveness is not readiness", r.Status)
		}
		if value(h.scrape(t), "ce_ready") != 0 {
			t.Error("ce_ready is not 0 with the writer stopped")
		}
	})
	t.Run("a vanished sidecar is not ready", func(t *testing.T) {
		h := newHarness(t, "")
		if err := os.Remove(room.SidecarPath(h.Eng.DocPath)); err != nil {
			t.Fatal(err)
		}
		st, body := h.readyz(t, h.Ingress.URL)
		if st != 503 || body["reason"] != "sidecar" {
			t.Errorf("/readyz after the sidecar was removed = %d %v, want 503 sidecar", st, body)
		}
		if msg, _ := body["message"].(string); strings.Contains(msg, h.Dir) {
			t.Errorf("the public answer names a path: %q", msg)
		}
	})
	t.Run("a transport that is down is not ready", func(t *testing.T) {
		var down atomic.Bool
		h := newHarness(t, "", harnessOpts{Server: func(c *Config) {
			c.TransportUp = func() error {
				if down.Load() {
					return errTestTransportDown
				}
				return nil
			}
		}})
		if st, _ := h.readyz(t, h.Owner.URL); st != 200 {
			t.Fatalf("/readyz with the transport up = %d", st)
		}
		down.Store(true)
		st, body := h.readyz(t, h.Owner.URL)
		if st != 503 || body["reason"] != "transport" {
			t.Errorf("/readyz with the transport down = %d %v, want 503 transport", st, body)
		}
	})
}

type testErr string

func (e testErr) Error() string { return string(e) }

const errTestTransportDown = testErr("the node is gone")

// serveMetrics serves h's metrics listener as ce serve --metrics-addr does.
func (h *roomHarness) serveMetrics(t testing.TB) string {
	t.Helper()
	s := httptest.NewUnstartedServer(h.API.MetricsHandler())
	s.Listener.Close()
	s.Listener = h.API.MetricsListener(roomtest.Listener(t))
	s.Config = NewHTTPServer(h.API.MetricsHandler(), h.Log)
	s.Start()
	t.Cleanup(s.Close)
	return s.URL
}

// The metrics listener is for a scraper with no credential: it serves
// /metrics, /healthz and /readyz and nothing else, whatever is sent.
func TestMetricsListenerServesMetricsOnly(t *testing.T) {
	h := newHarness(t, "")
	guest := h.join("guest", "read", "admin")
	base := h.serveMetrics(t)
	cases := []struct {
		name, method, path, token string
		opts                      []reqOpt
		status                    int
	}{
		{"metrics without a credential", "GET", "/metrics", "", nil, 200},
		{"healthz", "GET", "/healthz", "", nil, 200},
		{"readyz", "GET", "/readyz", "", nil, 200},
		{"the JSON metrics are not there", "GET", "/debug/metrics", h.OpToken, nil, 404},
		{"profiles are not there", "GET", "/debug/pprof/heap", h.OpToken, nil, 404},
		{"the page is not there", "GET", "/", "", nil, 404},
		{"MCP is not there", "POST", "/mcp", guest.SessionToken, nil, 404},
		{"the plain routes are not there", "GET", "/workspace/status", guest.SessionToken, nil, 404},
		{"joining is not there", "POST", "/session/join", "", nil, 404},
		{"metrics is read-only", "POST", "/metrics", "", nil, 405},
		{"a DNS name in Host is refused", "GET", "/metrics", "", []reqOpt{mcptest.WithHost("evil.example:80")}, 403},
		{"localhost in Host is served", "GET", "/metrics", "", []reqOpt{mcptest.WithHost("localhost")}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.Do(t, c.method, base+c.path, c.token, nil, c.opts...)
			if r.Status != c.status {
				t.Fatalf("%s %s: %d, want %d: %.200s", c.method, c.path, r.Status, c.status, r.Body)
			}
			if c.status == 200 && c.path == "/metrics" {
				if value(families(t, r.Body), "ce_connections_open", "listener=metrics") < 1 {
					t.Error("the metrics listener's own connection is not counted")
				}
			}
		})
	}
}

// The metrics listener has the same slow-client bounds as the others and a
// cap of its own: its connections never show a credential, so at the cap
// the one idle longest makes room for a newcomer, and the room's other
// listeners are not touched.
func TestMetricsListenerBoundsItsConnections(t *testing.T) {
	h := newHarness(t, "")
	srv := NewHTTPServer(h.API.MetricsHandler(), h.Log)
	if srv.ReadHeaderTimeout != ReadHeaderTimeout || srv.IdleTimeout != IdleTimeout {
		t.Fatalf("metrics server timeouts %v/%v, want %v/%v", srv.ReadHeaderTimeout, srv.IdleTimeout, ReadHeaderTimeout, IdleTimeout)
	}
	base := h.serveMetrics(t)
	for i := range DefaultMetricsMaxConns + 4 {
		c := dialRaw(t, base, "")
		wantCode(t, c.send("GET", "/healthz", ""), 200, fmt.Sprint("metrics connection ", i))
	}
	st := h.API.connStats()
	m := st["metrics"]
	if m.Open > DefaultMetricsMaxConns || m.Refused != 0 || m.ReclaimedBy["cap_unauthenticated_idle"] < 4 {
		t.Errorf("metrics connections = %+v: want at most %d open, none refused, the idle ones reclaimed", m, DefaultMetricsMaxConns)
	}
	if o := st["owner"]; o.Reclaimed != 0 || o.Refused != 0 {
		t.Errorf("owner connections = %+v: the metrics listener's crowd touched them", o)
	}
}
