package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/present"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// BenchmarkMCPReads measures tasks/get and tools/call handoff_get on a real
// loopback listener with 64 concurrent clients, beside a trivial JSON POST
// handler mounted on the same chi router in the same run: the ratio says how
// close the MCP read path comes to the HTTP ceiling of this machine.
func BenchmarkMCPReads(b *testing.B) {
	const clients = 64
	env := newBenchServer(b)
	var ceiling float64
	cases := []struct {
		name string
		req  func(i int) *http.Request
	}{
		{"trivial-post", func(int) *http.Request {
			return env.request("/trivial", []byte(`{"ping":1}`))
		}},
		{"tasks-get", func(i int) *http.Request {
			id := env.tasks[i%len(env.tasks)]
			return env.rpc("tasks/get", id, map[string]any{"taskId": id})
		}},
		{"handoff-get", func(i int) *http.Request {
			h := env.handoffs[i%len(env.handoffs)]
			return env.rpc("tools/call", "handoff_get", map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": h}})
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rps, p50, p99 := env.load(b, clients, c.req)
			b.ReportMetric(rps, "req/s")
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			if c.name == "trivial-post" {
				ceiling = rps
			} else if ceiling > 0 {
				b.ReportMetric(rps/ceiling, "x-ceiling")
			}
		})
	}
}

type benchServer struct {
	handler  http.Handler // the ingress handler, for in-process requests
	url      string
	token    string
	client   *http.Client
	mcp      *mcptest.Client
	tasks    []string
	handoffs []string
	eng      *room.Engine // for BenchmarkWritePath's second session
	room     *actor.Room
}

func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	return newBenchServerWith(b, nil)
}

// newBenchServerWith is newBenchServer whose front door logs to log (nil:
// nowhere).
func newBenchServerWith(b *testing.B, log *slog.Logger) *benchServer {
	b.Helper()
	dir := b.TempDir()
	doc := filepath.Join(dir, "bench.md")
	os.WriteFile(doc, []byte("# Bench\n\n## Part\n\ntext\n"), 0o644)
	ctx := context.Background()
	limits := room.Defaults()
	limits.RateLimitPerMinute = 0
	limits.MaxTasksPerParticipant = limits.MaxActiveTasks // 32 tasks from one participant
	eng, err := room.NewEngine(doc, limits)
	if err != nil {
		b.Fatal(err)
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		b.Fatal(err)
	}
	hub := listen.NewHub(listen.Config{Encode: present.EncodeChange})
	rm, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st, Publisher: hub, HostName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Config{Room: rm, Hub: hub, Logger: log})
	router := chi.NewRouter()
	router.Post("/trivial", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, "bad", 400)
			return
		}
		sendJSON(w, http.StatusOK, map[string]any{"ok": true, "echo": v})
	})
	router.Mount("/", srv.IngressHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: router}
	go hs.Serve(ln)
	b.Cleanup(func() {
		hub.Close()
		hs.Close()
		rm.Close(ctx)
		st.Close()
	})
	op := room.Operator(eng.HostID)
	g, err := actor.Do(ctx, rm, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
		return eng.CreateInvite(tx, op, room.InviteInput{})
	})
	if err != nil {
		b.Fatal(err)
	}
	s, err := actor.Do(ctx, rm, "join", func(tx *room.Tx) (room.SessionGrant, error) {
		return eng.Join(tx, room.JoinInput{Secret: g.Token, Name: "owner"})
	})
	if err != nil {
		b.Fatal(err)
	}
	p := room.Principal{ParticipantID: s.ParticipantID, SessionRef: s.SessionRef, Caps: room.DefaultAgentCaps()}
	env := &benchServer{handler: srv.IngressHandler(), url: "http://" + ln.Addr().String(), token: s.SessionToken,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 0}}, eng: eng, room: rm}
	env.mcp = mcptest.New(env.client, env.url+"/mcp", env.token, true, "")
	for i := range 32 {
		res, err := actor.Do(ctx, rm, "create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
			return eng.CreateHandoff(tx, p, room.CreateHandoffInput{Summary: fmt.Sprintf("task %d", i)})
		})
		if err != nil {
			b.Fatal(err)
		}
		env.tasks = append(env.tasks, res.Task.TaskID)
		env.handoffs = append(env.handoffs, res.Handoff.HandoffID)
	}
	return env
}

func (e *benchServer) request(path string, body []byte) *http.Request {
	req, _ := mcptest.NewHTTPRequest(context.Background(), "POST", e.url+path, "", body)
	return req
}

func (e *benchServer) rpc(method, _ string, params map[string]any) *http.Request {
	req, _, _ := e.mcp.NewRequest(context.Background(), mcptest.Request{ID: 1, Method: method, Params: params})
	return req
}

// load sends b.N requests from n clients and returns requests/s and the
// p50/p99 latency. Any non-200 answer fails the benchmark.
func (e *benchServer) load(b *testing.B, n int, mk func(i int) *http.Request) (float64, time.Duration, time.Duration) {
	lat := make([][]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				resp, err := e.client.Do(mk(int(i)))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return 0, 0, 0
	}
	slices.Sort(all)
	return float64(len(all)) / elapsed.Seconds(), all[len(all)/2], all[len(all)*99/100]
}
