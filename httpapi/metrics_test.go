package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// /debug/metrics is what an operator and the bench read to see the cap and
// the fan-out: its names are part of the scriptable contract.
func TestMetricsReportLiveCountsAndTotals(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	metrics := func() map[string]any {
		t.Helper()
		r := h.Do(t, "GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
		wantOK(t, r)
		return r.JSON(t)
	}

	before := metrics()
	for range 3 {
		wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff"), owner.SessionToken,
			map[string]any{"summary": "count me"}))
	}
	after := metrics()

	room, _ := after["room"].(map[string]any)
	wantRoom := []string{"active_tasks", "events_in_ring", "handoffs", "input_required_tasks", "join_challenges_outstanding", "live_sessions", "task_rows"}
	if got := slices.Sorted(maps.Keys(room)); !reflect.DeepEqual(got, wantRoom) {
		t.Errorf("room keys = %v, want %v", got, wantRoom)
	}
	if room["active_tasks"] != float64(3) {
		t.Errorf("active_tasks = %v after three creates, want 3", room["active_tasks"])
	}
	// The totals may be up to totalsEvery old: the first scrape's, or fresh.
	b, _ := before["room"].(map[string]any)
	if n, _ := b["handoffs"].(float64); room["handoffs"] != n && room["handoffs"] != n+3 {
		t.Errorf("handoffs total = %v, want the cached %v or the fresh %v", room["handoffs"], n, n+3)
	}
	// The bench divides the writer's CPU by its commands: three creates
	// must show as CPU spent (the thread clock is Linux's; CI is Linux).
	cpu := func(m map[string]any) float64 {
		w, _ := m["writer"].(map[string]any)
		v, ok := w["cpu_seconds"].(float64)
		if !ok {
			t.Fatalf("writer block has no numeric cpu_seconds: %v", w)
		}
		return v
	}
	if runtime.GOOS == "linux" && cpu(after) <= cpu(before) {
		t.Errorf("writer cpu_seconds %v → %v across three creates, want it to grow", cpu(before), cpu(after))
	}
	listen, _ := after["listen"].(map[string]any)
	for _, k := range []string{"subscribers", "pending_batches", "delivered", "dropped", "dropped_queue_full", "dropped_slow", "ended", "disconnected"} {
		if _, ok := listen[k]; !ok {
			t.Errorf("listen block has no %q: %v", k, listen)
		}
	}
}

func TestPprofServesTheLocalOperatorOnly(t *testing.T) {
	h := newHarness(t, "")
	guest := h.join("guest", "read", "admin")
	cases := []struct {
		name   string
		url    string
		token  string
		status int
	}{
		{"the operator gets a heap profile", h.OwnerURL("/debug/pprof/heap"), h.OpToken, 200},
		{"the operator gets the index", h.OwnerURL("/debug/pprof/"), h.OpToken, 200},
		{"an unknown profile is not found", h.OwnerURL("/debug/pprof/nosuch"), h.OpToken, 404},
		{"an admin session is refused", h.OwnerURL("/debug/pprof/heap"), guest.SessionToken, 403},
		{"no credential is refused", h.OwnerURL("/debug/pprof/heap"), "", 401},
		{"the ingress listener has no profiles", h.IngressURL("/debug/pprof/heap"), guest.SessionToken, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.Do(t, "GET", c.url, c.token, nil)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %.200s", r.Status, c.status, r.Body)
			}
			// A profile is gzipped protobuf; the index is an HTML page.
			if c.status == 200 && strings.HasSuffix(c.url, "/heap") && !bytes.HasPrefix(r.Body, []byte{0x1f, 0x8b}) {
				t.Fatalf("the heap profile is not gzip: %.40q", r.Body)
			}
			if c.status == 200 && strings.HasSuffix(c.url, "/pprof/") && !bytes.Contains(r.Body, []byte("goroutine")) {
				t.Fatalf("the index lists no goroutine profile: %.200s", r.Body)
			}
		})
	}
}

// A client that gives up mid-request is not a server failure: it is logged
// quietly, and a real internal failure still is an error.
func TestClientGoneIsNotLoggedAsAnError(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	s.logFailure("mcp request failed", room.Internal(fmt.Errorf("waiting: %w", context.Canceled)))
	if out := buf.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "client went away") {
		t.Errorf("cancelled request logged as %q, want a debug line", out)
	}
	buf.Reset()
	s.logFailure("mcp request failed", room.Internal(errors.New("disk I/O error")))
	if out := buf.String(); !strings.Contains(out, "level=ERROR") {
		t.Errorf("internal failure logged as %q, want an error", out)
	}
}

// The soak reads the room's goroutines and heap from /debug/metrics (RSS
// and descriptors come from /proc): a leak of either must be visible there.
func TestMetricsReportTheProcess(t *testing.T) {
	h := newHarness(t, "")
	r := h.Do(t, "GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
	wantOK(t, r)
	proc, ok := r.JSON(t)["process"].(map[string]any)
	if !ok {
		t.Fatalf("no process block in /debug/metrics: %.300s", r.Body)
	}
	// The harness serves in this process, so its goroutines are ours.
	g, _ := proc["goroutines"].(float64)
	if g < 1 || g > float64(4*runtime.NumGoroutine()+100) {
		t.Errorf("goroutines = %v, this process has %d", proc["goroutines"], runtime.NumGoroutine())
	}
	for _, k := range []string{"heap_live_bytes", "go_mapped_bytes", "gomaxprocs"} {
		if v, _ := proc[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want a positive figure", k, proc[k])
		}
	}
	if _, ok := proc["gc_cycles"].(float64); !ok {
		t.Errorf("gc_cycles missing: %v", proc)
	}
}
