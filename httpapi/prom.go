package httpapi

import (
	"context"
	"github.com/commonroom/ce/httpapi/internal/reqnote"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// promMetrics is GET /metrics: the numbers of /debug/metrics in the
// Prometheus text format, on a registry of the server's own (no global
// state: two rooms in one test binary do not share counters). Most
// families are read from the counters the room already keeps, at scrape
// time (roomCollector); the request histogram is the one observed here.
type promMetrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	// mcpDuration is the OpenTelemetry MCP convention's
	// mcp.server.operation.duration, in Prometheus' spelling.
	mcpDuration *prometheus.HistogramVec
	// httpDuration is the OpenTelemetry HTTP convention's
	// http.server.request.duration: every request on the owner and ingress
	// listeners, the plain doors, the pages and /mcp alike.
	httpDuration *prometheus.HistogramVec
}

// httpDurationBuckets are the HTTP convention's recommended boundaries
// (seconds).
var httpDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// mcpDurationBuckets are the convention's recommended boundaries (seconds).
var mcpDurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// scrapeReadTimeout bounds the one sidecar read a scrape makes (the live
// counts), so a stuck read pool cannot hold a scraper.
const scrapeReadTimeout = 5 * time.Second

func newPromMetrics(s *Server) *promMetrics {
	m := &promMetrics{reg: prometheus.NewRegistry()}
	m.mcpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_server_operation_duration_seconds",
		Help:    "MCP request or notification duration as observed on the server, from receipt until the result is sent (a subscriptions/listen's is its stream's life).",
		Buckets: mcpDurationBuckets,
	}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_server_request_duration_seconds",
		Help:    "HTTP request duration on the owner and ingress listeners, from receipt until the handler returns (a stream's is its life).",
		Buckets: httpDurationBuckets,
	}, []string{"http_request_method", "http_route", "http_response_status_code", "listener"})
	m.reg.MustRegister(m.mcpDuration, m.httpDuration, newRoomCollector(s),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// observeRequest counts one MCP request: the only place a request is
// observed. Its labels come from bounded sets (see reqnote.Note.Labels).
func (m *promMetrics) observeRequest(n reqnote.Note) {
	method, tool, errType := n.Labels()
	m.mcpDuration.WithLabelValues(method, tool, errType).Observe(n.Duration.Seconds())
}

// observeHTTP counts one HTTP request. Every label is from a bounded set:
// the method as logMethod names it, the router's pattern (never the raw
// path; empty for a path no route matched), the status a handler chose,
// and the listener.
func (m *promMetrics) observeHTTP(r *http.Request, info *requestInfo, route string, status int) {
	m.httpDuration.WithLabelValues(logMethod(r.Method), route, statusLabel(status), info.listener()).
		Observe(time.Since(info.start).Seconds())
}

// statusLabels are the HTTP status codes as label values, made once so a
// request's observation does not format its status.
var statusLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}

// promScrape is GET /metrics on the owner listener: the operator's
// credential, like /debug/metrics. The metrics listener serves the same
// handler with no credential (MetricsHandler).
func (s *Server) promScrape(w http.ResponseWriter, r *http.Request) {
	if !s.requireOperatorBearer(w, r, "metrics") {
		return
	}
	s.prom.handler.ServeHTTP(w, r)
}

// roomCollector reads the room's counters when scraped.
type roomCollector struct {
	s *Server

	commands, failed, batches, overloaded, sweeps, cpu *prometheus.Desc
	queue, commit, batchSize                           *prometheus.Desc
	tasks, sessions, events                            *prometheus.Desc
	streams, drops, ends, delivered                    *prometheus.Desc
	connsOpen, refused, reclaimed                      *prometheus.Desc
	sidecar, up                                        *prometheus.Desc
}

func newRoomCollector(s *Server) *roomCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &roomCollector{s: s,
		commands:   d("ce_writer_commands_total", "Commands the room's writer ran."),
		failed:     d("ce_writer_commands_failed_total", "Commands the writer rolled back to their savepoint."),
		batches:    d("ce_writer_batches_total", "Write transactions the writer committed."),
		overloaded: d("ce_writer_overloaded_total", "Commands refused because the writer's queue was full."),
		sweeps:     d("ce_writer_sweeps_total", "Sweeps of the time rules (expiry, purge) the writer ran."),
		cpu:        d("ce_writer_cpu_seconds_total", "CPU time of the writer's own thread (estimated from sampled turns)."),
		queue:      d("ce_writer_queue_depth", "Commands waiting for the writer now."),
		commit:     d("ce_writer_commit_duration_seconds", "Duration of each batch's COMMIT (WAL append and fsync)."),
		batchSize:  d("ce_writer_batch_commands", "Commands in each committed batch (group commit)."),
		tasks:      d("ce_tasks_live", "Live tasks (not terminal) by status.", "status"),
		sessions:   d("ce_sessions_live", "Live sessions (not ended, not expired)."),
		events:     d("ce_events_in_ring", "Events held in the replay ring."),
		streams:    d("ce_streams", "Live streams registered with the fan-out hub."),
		drops:      d("ce_stream_drops_total", "Live streams dropped for not keeping up, by reason.", "reason"),
		ends:       d("ce_stream_ends_total", "Live streams that ended otherwise, by reason.", "reason"),
		delivered:  d("ce_stream_frames_delivered_total", "Frames put into live streams' queues."),
		connsOpen:  d("ce_connections_open", "Connections held now, by listener.", "listener"),
		refused:    d("ce_connections_refused_total", "Connections refused (503 and closed), by listener and reason.", "listener", "reason"),
		reclaimed:  d("ce_connections_reclaimed_total", "Connections the room closed to share them fairly, by listener and reason.", "listener", "reason"),
		sidecar:    d("ce_sidecar_bytes", "The sidecar's size on disk, by file (db, wal).", "file"),
		up:         d("ce_ready", "1 when the room is ready (what /readyz answers 200 for), else 0."),
	}
}

func (c *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.commands, c.failed, c.batches, c.overloaded, c.sweeps, c.cpu, c.queue,
		c.commit, c.batchSize, c.tasks, c.sessions, c.events, c.streams, c.drops, c.ends, c.delivered,
		c.connsOpen, c.refused, c.reclaimed, c.sidecar, c.up} {
		ch <- d
	}
}

func (c *roomCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := s.room.Stats()
	counter(c.commands, float64(st.Commands.Load()))
	counter(c.failed, float64(st.Failed.Load()))
	counter(c.batches, float64(st.Batches.Load()))
	counter(c.overloaded, float64(st.Overloaded.Load()))
	counter(c.sweeps, float64(st.Sweeps.Load()))
	counter(c.cpu, st.CPUSeconds())
	gauge(c.queue, float64(s.room.Queued()))
	histogram(ch, c.commit, st.CommitSeconds.Snapshot())
	histogram(ch, c.batchSize, st.BatchCommands.Snapshot())

	ctx, cancel := context.WithTimeout(context.Background(), scrapeReadTimeout)
	defer cancel()
	counts, err := actor.Read(ctx, s.room, func(q room.Querier) (map[string]int, error) {
		return s.eng.Counts(ctx, q)
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.tasks, err)
	} else {
		gauge(c.tasks, float64(counts["active_tasks"]-counts["input_required_tasks"]), "working")
		gauge(c.tasks, float64(counts["input_required_tasks"]), "input_required")
		gauge(c.sessions, float64(counts["live_sessions"]))
		gauge(c.events, float64(counts["events_in_ring"]))
	}

	if s.hub != nil {
		hs := s.hub.Stats()
		gauge(c.streams, float64(hs.Subscribers))
		counter(c.drops, float64(hs.DroppedQueueFull), "queue_full")
		counter(c.drops, float64(hs.DroppedSlow), "slow")
		counter(c.ends, float64(hs.Ended), "ended")
		counter(c.ends, float64(hs.Disconnected), "disconnected")
		counter(c.delivered, float64(hs.Delivered))
	}

	for name, cs := range s.connStats() {
		gauge(c.connsOpen, float64(cs.Open), name)
		// Both reasons always appear, so a rate() has a series to start from.
		for _, why := range []string{"cap", "peer_share"} {
			counter(c.refused, float64(cs.RefusedBy[why]), name, why)
		}
		for why, n := range cs.ReclaimedBy {
			counter(c.reclaimed, float64(n), name, why)
		}
	}

	if z, err := s.eng.SidecarSize(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.sidecar, err)
	} else {
		gauge(c.sidecar, float64(z.DBBytes), "db")
		gauge(c.sidecar, float64(z.WALBytes), "wal")
	}
	ready := 0.0
	if s.readiness(ctx) == "" {
		ready = 1
	}
	gauge(c.up, ready)
}

// histogram sends an actor histogram's snapshot as a Prometheus one.
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h actor.HistogramSnapshot) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}
