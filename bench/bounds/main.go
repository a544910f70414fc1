// Command bounds reproduces the memory and size findings of issue 13 items
// 8 and 9 against a real `ce serve` on loopback, so the same run can be
// made with the binary before a fix and after it:
//
//	go run ./bench/bounds [--ce PATH] [--scenarios subscribe,flood,fill] [--json]
//
// Without --ce it builds ce from this tree. The scenarios:
//
//   - subscribe: one session sends 400 resources/subscribe with ~1 MiB
//     section URIs (within the rate limit), then leaves; RSS and the heap in
//     use after a GC are read before, after the flood, and after the leave.
//   - flood: one session sends 300 proposals of 252 KB; the sidecar's growth,
//     the size of one listing over HTTP and over MCP, and the peak RSS while
//     five listings run at once.
//   - fill: 8 sessions send 8 proposals of 252 KB each (the most the room
//     keeps pending after the fix), then the same listing figures.
//
// Memory is read from /proc/PID/status (Linux) and from the room's own
// /debug/pprof/heap?gc=1 on the owner listener with the operator token.
// Every request goes to 127.0.0.1, through internal/mcptest, the one client
// the tests, the crash test and the bench share, and the run ends by itself.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
)

type room struct {
	proc    *cetest.Proc
	pid     int
	file    string
	ingress string
	owner   string
	opToken string
	invite  string
	wsURI   string
	hc      *http.Client
}

// figures is one scenario's results, printed as a table and as JSON.
type figures struct {
	Scenario string           `json:"scenario"`
	Values   map[string]int64 `json:"values"`
	order    []string
}

func (f *figures) set(k string, v int64) {
	if f.Values == nil {
		f.Values = map[string]int64{}
	}
	if _, ok := f.Values[k]; !ok {
		f.order = append(f.order, k)
	}
	f.Values[k] = v
}

func main() {
	bin := flag.String("ce", "", "the ce binary to run (default: build this tree)")
	scen := flag.String("scenarios", "subscribe,flood,fill", "which reproductions to run")
	asJSON := flag.Bool("json", false, "print JSON")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "ce-bounds-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	if *bin == "" {
		if *bin, err = cetest.BuildCE(ctx, work); err != nil {
			fail(err)
		}
	}
	var out []*figures
	for _, s := range strings.Split(*scen, ",") {
		var f *figures
		switch strings.TrimSpace(s) {
		case "subscribe":
			f, err = subscribeScenario(ctx, *bin, filepath.Join(work, "subscribe"))
		case "flood":
			f, err = proposalScenario(ctx, *bin, filepath.Join(work, "flood"), "flood", 1, 300)
		case "fill":
			f, err = proposalScenario(ctx, *bin, filepath.Join(work, "fill"), "fill", 8, 8)
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		if err != nil {
			fail(fmt.Errorf("%s: %w", s, err))
		}
		out = append(out, f)
		if !*asJSON {
			fmt.Printf("%s (%s)\n", f.Scenario, *bin)
			for _, k := range f.order {
				fmt.Printf("  %-44s %s\n", k, human(k, f.Values[k]))
			}
		}
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(out)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bounds:", err)
	os.Exit(1)
}

func human(k string, v int64) string {
	if strings.HasSuffix(k, "_bytes") {
		return fmt.Sprintf("%.1f MB (%d)", float64(v)/1e6, v)
	}
	return strconv.FormatInt(v, 10)
}

// start runs `ce serve FILE --json` in dir and reads its banner and
// operator credential.
func start(ctx context.Context, bin, dir string) (*room, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "room.md")
	doc := "# Room\n\nA room for the bounds reproduction.\n\n## Plan\n\nNothing yet.\n\n## Notes\n\nNone.\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		return nil, err
	}
	p, err := cetest.StartWith(bin, cetest.Options{Dir: dir, Stderr: io.Discard, DieWithParent: true}, "serve", file, "--json")
	if err != nil {
		return nil, err
	}
	kill := func() { p.Kill9(10 * time.Second) }
	line, err := p.FirstLineCtx(ctx, time.Minute)
	if err != nil {
		kill()
		return nil, fmt.Errorf("no banner: %v", err)
	}
	var b struct {
		WorkspaceID string `json:"workspace_id"`
		IngressURL  string `json:"ingress_url"`
		OwnerURL    string `json:"owner_url"`
		Invite      string `json:"invite"`
		PID         int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		kill()
		return nil, fmt.Errorf("banner %q: %v", line, err)
	}
	cred, err := os.ReadFile(file + ".commonroom.owner")
	if err != nil {
		kill()
		return nil, err
	}
	var oc struct {
		OwnerURL      string `json:"owner_url"`
		OperatorToken string `json:"operator_token"`
	}
	if err := json.Unmarshal(cred, &oc); err != nil {
		kill()
		return nil, err
	}
	return &room{proc: p, pid: p.Pid(), file: file, ingress: b.IngressURL, owner: oc.OwnerURL,
		opToken: oc.OperatorToken, invite: b.Invite, wsURI: "commonroom://workspace/" + b.WorkspaceID,
		hc: &http.Client{Timeout: 2 * time.Minute}}, nil
}

func (r *room) stop() {
	if _, err := r.proc.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		r.proc.Kill9(10 * time.Second)
	}
}

// do sends one plain request to the room and reads its whole answer.
func (r *room) do(ctx context.Context, method, url, token string, body any) (mcptest.Response, error) {
	return mcptest.Do(ctx, r.hc, method, url, token, body)
}

func (r *room) join(ctx context.Context, name string, invite string) (mcptest.Session, error) {
	return mcptest.Join(ctx, r.hc, r.ingress, invite, name, "agent")
}

// inviteFor makes an invitation for n joins with the agent capabilities.
func (r *room) inviteFor(ctx context.Context, n int) (string, error) {
	g, err := mcptest.Invite(ctx, r.hc, r.owner, r.opToken,
		map[string]any{"capabilities": []string{"read", "observe", "propose", "checkout", "commit"}, "max_uses": n})
	return g.Token, err
}

// mcp is the MCP client of one session: it sends what a conforming client
// sends (the routing headers, params._meta).
func (r *room) mcp(s mcptest.Session) *mcptest.Client {
	return mcptest.New(r.hc, r.ingress+"/mcp", s.SessionToken, false, "ce-bounds")
}

// rss is the process's resident set now (VmRSS) in bytes.
func (r *room) rss() int64 { return procStatus(r.pid, "VmRSS:") }

func procStatus(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return -1
}

// heapAfterGC asks the room for a heap profile after a GC and returns the
// runtime's HeapInuse then.
func (r *room) heapAfterGC(ctx context.Context) (int64, error) {
	res, err := r.do(ctx, "GET", r.owner+"/debug/pprof/heap?gc=1&debug=1", r.opToken, nil)
	if err != nil || res.Status != 200 {
		return 0, fmt.Errorf("heap profile: %d %v", res.Status, err)
	}
	for _, line := range strings.Split(string(res.Raw), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no HeapInuse in the heap profile")
}

func (r *room) memory(ctx context.Context, f *figures, when string) error {
	heap, err := r.heapAfterGC(ctx)
	if err != nil {
		return err
	}
	f.set(when+"_heap_inuse_after_gc_bytes", heap)
	f.set(when+"_rss_bytes", r.rss())
	return nil
}

func subscribeScenario(ctx context.Context, bin, dir string) (*figures, error) {
	r, err := start(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	f := &figures{Scenario: "subscribe: 400 resources/subscribe with ~1 MiB unknown section URIs, then leave"}
	g, err := r.join(ctx, "subscriber", r.invite)
	if err != nil {
		return nil, err
	}
	if err := r.memory(ctx, f, "start"); err != nil {
		return nil, err
	}
	// A URI that fills the 1 MiB body limit but for the envelope.
	pad := strings.Repeat("x", (1<<20)-2048)
	mc := r.mcp(g)
	var ok, refused int64
	var answer int64
	for i := range 400 {
		uri := fmt.Sprintf("%s/section/%05d%s", r.wsURI, i, pad)
		res, err := mc.Do(ctx, mcptest.Request{Method: "resources/subscribe", Params: map[string]any{"uri": uri}})
		if err != nil {
			return nil, err
		}
		if res.Status == 200 && bytes.Contains(res.Raw, []byte(`"result"`)) {
			ok++
		} else {
			refused++
		}
		answer = max(answer, int64(len(res.Raw)))
	}
	f.set("subscribes_accepted", ok)
	f.set("subscribes_refused", refused)
	f.set("largest_answer_bytes", answer)
	if err := r.memory(ctx, f, "after_subscribes"); err != nil {
		return nil, err
	}
	if res, err := r.do(ctx, "POST", r.ingress+"/workspace/leave", g.SessionToken, []byte("{}")); err != nil || res.Status != 200 {
		return nil, fmt.Errorf("leave: %d %s %v", res.Status, mcptest.Clip(res.Raw), err)
	}
	time.Sleep(time.Second) // the session end reaches the registry through the hub
	if err := r.memory(ctx, f, "after_leave"); err != nil {
		return nil, err
	}
	return f, nil
}

func sidecarBytes(file string) int64 {
	var n int64
	for _, s := range []string{".commonroom.db", ".commonroom.db-wal"} {
		if st, err := os.Stat(file + s); err == nil {
			n += st.Size()
		}
	}
	return n
}

func proposalScenario(ctx context.Context, bin, dir, name string, sessions, each int) (*figures, error) {
	r, err := start(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	f := &figures{Scenario: fmt.Sprintf("%s: %d session(s) × %d proposals of 252 KB", name, sessions, each)}
	inv, err := r.inviteFor(ctx, sessions)
	if err != nil {
		return nil, err
	}
	var gs []mcptest.Session
	for i := range sessions {
		g, err := r.join(ctx, fmt.Sprintf("proposer-%d", i), inv)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	if err := r.memory(ctx, f, "start"); err != nil {
		return nil, err
	}
	before := sidecarBytes(r.file)
	content := "## Notes\n\n" + strings.Repeat("A line of proposed text that is long enough to matter. ", 252_000/56) + "\n"
	var accepted, refused atomic.Int64
	began := time.Now()
	for i := range each {
		for _, g := range gs {
			body, _ := json.Marshal(map[string]any{"target": "Notes", "base_version": 1, "summary": fmt.Sprintf("flood %d", i),
				"change": map[string]any{"section": "Notes", "content": content}})
			res, err := r.do(ctx, "POST", r.ingress+"/workspace/propose", g.SessionToken, body)
			if err != nil {
				return nil, err
			}
			if res.Status == 200 {
				accepted.Add(1)
			} else {
				refused.Add(1)
			}
		}
	}
	f.set("proposals_accepted", accepted.Load())
	f.set("proposals_refused", refused.Load())
	f.set("flood_ms", time.Since(began).Milliseconds())
	f.set("sidecar_growth_bytes", sidecarBytes(r.file)-before)
	tok := gs[0].SessionToken
	listing := mcptest.Request{Method: "tools/call", Params: map[string]any{"name": "workspace_proposals", "arguments": map[string]any{}}}
	res, err := r.do(ctx, "GET", r.ingress+"/workspace/proposals", tok, nil)
	if err != nil || res.Status != 200 {
		return nil, fmt.Errorf("listing: %d %v", res.Status, err)
	}
	f.set("http_listing_bytes", int64(len(res.Raw)))
	res, err = r.mcp(gs[0]).Do(ctx, listing)
	if err != nil || res.Status != 200 {
		return nil, fmt.Errorf("MCP listing: %d %v", res.Status, err)
	}
	f.set("mcp_listing_bytes", int64(len(res.Raw)))
	res, err = r.do(ctx, "GET", r.ingress+"/workspace/room", tok, nil)
	if err != nil || res.Status != 200 {
		return nil, fmt.Errorf("room view: %d %v", res.Status, err)
	}
	f.set("room_view_bytes", int64(len(res.Raw)))
	if err := r.memory(ctx, f, "before_listings"); err != nil {
		return nil, err
	}
	peak, err := r.peakDuring(func() error {
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for i := range 5 {
			wg.Go(func() {
				var res mcptest.Response
				var err error
				if g := gs[i%len(gs)]; i%2 == 0 {
					res, err = r.do(ctx, "GET", r.ingress+"/workspace/proposals", g.SessionToken, nil)
				} else {
					res, err = r.mcp(g).Do(ctx, listing)
				}
				if err == nil && res.Status != 200 {
					err = fmt.Errorf("status %d", res.Status)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.set("peak_rss_five_listings_bytes", peak)
	return f, nil
}

// peakDuring samples RSS every 2 ms while fn runs and returns the highest.
// It also resets the kernel's high-water mark first and reads it after, so
// a peak between two samples is not missed.
func (r *room) peakDuring(fn func() error) (int64, error) {
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", r.pid), []byte("5"), 0o200)
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if v := r.rss(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	err := fn()
	close(stop)
	<-done
	return max(peak.Load(), procStatus(r.pid, "VmHWM:")), err
}
