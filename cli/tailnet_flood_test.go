package cli

// One tailnet node cannot lock the others out of a room (issue 25 item 1),
// with the real ce binary on an in-process test tailnet: a node that was
// never invited floods the room's node with idle keep-alive connections to
// /healthz, well beyond the ingress's cap, and keeps refreshing them, while
// an agent on another node keeps working and a third machine joins.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/transport/tailscale/tailnettest"
)

// TestTailnetFloodLeavesRoomForOtherNodes: with --max-conns 64 (a node's
// share 8) a stranger node holds at most its share however many
// connections it opens; an agent that joined before the flood keeps
// getting 200 on fresh connections through its held forward, and a `ce
// join` from another machine during the flood gets a session. On main the
// stranger's connections fill the ingress and both fail (503). The
// agent's success rate and p99 during the flood are logged as figures,
// not asserted beyond "every request succeeded".
//
// CE_FLOOD_FIGURES=1 runs it at ce's default caps (4,096; 512 a node) with
// a flood of 1,200 connections, beyond the tailnet forward cap of main
// (1,024), for the figures of the closing note.
func TestTailnetFloodLeavesRoomForOtherNodes(t *testing.T) {
	maxConns, floodN := 64, 200
	var serveExtra []string
	if os.Getenv("CE_FLOOD_FIGURES") == "" {
		serveExtra = []string{"--max-conns", strconv.Itoa(maxConns)}
	} else {
		maxConns, floodN = 4096, 1200
	}
	var figs figures
	defer figs.log(t)
	n := newTSNet(t, tailnettest.Options{AuthKey: tsKey})
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	env := n.env(t)
	s := spawnServe(t, dir, env, n.serveArgs("idea.md", serveExtra...)...)
	s.readyWithin(tsUp)
	hint := tsHint(t, s.Banner.Invite)

	agent := startHeldJoinWithin(t, tsUp, dir, env, n.joinArgs(s.Banner.Invite, "--name", "far-agent")...)
	local, _ := agent.out["local_url"].(string)
	token, _ := agent.out["session_token"].(string)
	if local == "" || token == "" {
		t.Fatalf("ce join --hold: %v", agent.out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), tsUp)
	defer cancel()
	stranger := n.tn.Node(t, ctx, "stranger")
	flood := &tailnetFlood{dial: stranger.Dial, to: fromRoomHint(hint).HostPort(), host: hint.Address}
	start := time.Now()
	flood.open(ctx, floodN)
	figs.add("the stranger opened %d idle keep-alive connections in %s (%d answered 200, %d refused or closed)",
		floodN, time.Since(start).Round(time.Millisecond), flood.served.Load(), flood.failed.Load())
	stop := flood.refresh(ctx) // keeps opening new ones while the agent works

	fresh := victimRequests(local, token, 200, true)
	kept := victimRequests(local, token, 200, false)
	figs.add("the agent's GET /workspace/status over the tailnet while the stranger floods, a fresh connection each: %s", fresh)
	figs.add("the same over kept-alive connections: %s", kept)

	var g inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--json"), &g)
	second := ceWithin(t, tsUp, dir, env, append([]string{"join"}, n.joinArgs(g.URI, "--name", "second", "--no-hold", "--json")...)...)
	var out map[string]any
	json.Unmarshal([]byte(second.stdout), &out)
	figs.add("a ce join from a third machine during the flood: exit %d, over %v", second.code, out["transport"])
	stop()
	figs.add("the stranger's flood: %d connections answered 200, %d refused or closed before an answer", flood.served.Load(), flood.failed.Load())

	code, body := ownerDo(t, file, "GET", "/debug/metrics", nil)
	in, _ := roomtest.JSONAt(body, "connections", "ingress").(map[string]any)
	figs.add("connections.ingress after the flood: %v", in)

	// The flood shares the tailnet's relay and this machine's two cores
	// with the agent, so a packet of the agent's may be lost and a request
	// time out; what must not happen is being refused (on main: all 503).
	if fresh.ok < fresh.n*9/10 || kept.ok < kept.n*9/10 {
		t.Errorf("the agent's requests during the flood: fresh %s, kept-alive %s; want at least 90%% answered 200", fresh, kept)
	}
	if second.code != 0 || out["transport"] != "tailscale" {
		t.Errorf("ce join during the flood: exit %d\n%s", second.code, second.output())
	}
	reclaimed, _ := in["reclaimed_by"].(map[string]any)
	if code != 200 || in["per_peer"] != float64(maxConns/8) || reclaimed["peer_share_unauthenticated_idle"] == nil {
		t.Errorf("/debug/metrics: %d connections.ingress %v: want the share %d and the stranger's own connections reclaimed for it", code, in, maxConns/8)
	}
}

// tailnetFlood is a node that opens keep-alive connections to the room and
// leaves each idle after one GET /healthz, as the stranger does. A
// connection the room closes is closed on this side too, as any client's
// would be (and so the stranger's node does not pile up endpoints).
type tailnetFlood struct {
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	to, host string

	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup // one reader per held connection
	served atomic.Int64
	failed atomic.Int64
}

// one opens a connection, asks /healthz on it and keeps it until the room
// closes it.
func (f *tailnetFlood) one(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := f.dial(dctx, "tcp", f.to)
	if err != nil {
		f.failed.Add(1)
		return
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", f.host)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	if err != nil || res.StatusCode != 200 {
		f.failed.Add(1)
		c.Close()
		return
	}
	f.served.Add(1)
	c.SetDeadline(time.Time{})
	f.mu.Lock()
	if f.conns == nil {
		f.conns = map[net.Conn]bool{}
	}
	f.conns[c] = true
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		io.Copy(io.Discard, br)
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
}

// open opens n connections, 16 at a time.
func (f *tailnetFlood) open(ctx context.Context, n int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f.one(ctx)
		}()
	}
	wg.Wait()
}

// refresh keeps opening connections until the returned stop is called,
// which also closes every connection the flood holds.
func (f *tailnetFlood) refresh(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			f.open(ctx, 16)
		}
	}()
	return func() {
		cancel()
		<-done
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	}
}

// victimFigures are n requests' outcome: how many were answered 200, and
// the latency quantiles of all of them (a failure counts with its time).
type victimFigures struct {
	n, ok    int
	p50, p99 time.Duration
	firstErr string
}

func (v victimFigures) String() string {
	s := fmt.Sprintf("%d/%d answered 200 (%.1f%%), p50 %s, p99 %s", v.ok, v.n, 100*float64(v.ok)/float64(max(v.n, 1)),
		v.p50.Round(time.Microsecond), v.p99.Round(time.Microsecond))
	if v.firstErr != "" {
		s += "; first failure: " + v.firstErr
	}
	return s
}

// victimRequests sends n GET /workspace/status to base as token, each on a
// fresh connection when fresh, else over one kept-alive client.
func victimRequests(base, token string, n int, fresh bool) victimFigures {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: fresh, MaxIdleConnsPerHost: 2}}
	defer c.CloseIdleConnections()
	v := victimFigures{n: n}
	ds := make([]time.Duration, 0, n)
	for range n {
		req, _ := http.NewRequest("GET", base+"/workspace/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		res, err := c.Do(req)
		why := ""
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				why = res.Status
			}
		} else {
			why = err.Error()
		}
		ds = append(ds, time.Since(start))
		if why == "" {
			v.ok++
		} else if v.firstErr == "" {
			v.firstErr = why
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	v.p50, v.p99 = ds[n/2], ds[(n*99)/100]
	return v
}
