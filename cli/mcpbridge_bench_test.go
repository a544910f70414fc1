package cli

// What `ce mcp` adds to a request, for both eras of host, against the same
// request sent straight to the room over HTTP in the same run: latency
// (p50, p99 of one request at a time) and throughput (16 in flight). Run
// with
//
//	go test -run '^$' -bench MCPBridge -benchtime 2000x ./cli
//
// and compare the bridge rows with the direct ones of the same run.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
)

// pipeBridge is a `ce mcp` child spoken to line by line through pipes, with
// nothing between the benchmark and the pipe.
type pipeBridge struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startPipeBridge(b *testing.B, dir, uri, state string) *pipeBridge {
	b.Helper()
	cmd := exec.Command(ceBin, "mcp", uri, "--state", state, "--log-level", "error")
	cmd.Dir, cmd.Env = dir, cetest.ChildEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	return &pipeBridge{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
}

// reportCPU reports, when the returned func runs, the bridge process's CPU
// time per request since reportCPU was called (user + system, from
// /proc/<pid>/stat in 10 ms ticks: meaningful over a thousand requests).
func (p *pipeBridge) reportCPU(b *testing.B) func() {
	start := procCPUTime(p.cmd.Process.Pid)
	return func() {
		used := procCPUTime(p.cmd.Process.Pid) - start
		b.ReportMetric(float64(used.Microseconds())/float64(b.N+20), "bridge-cpu-µs/req")
	}
}

func procCPUTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// roundTrip writes one line and reads one answer, which must not be an
// error of any kind.
func (p *pipeBridge) roundTrip(b *testing.B, line []byte) {
	if _, err := p.in.Write(line); err != nil {
		b.Fatal(err)
	}
	ans, err := p.out.ReadBytes('\n')
	if err != nil {
		b.Fatal(err)
	}
	if isFailure(ans) {
		b.Fatalf("through ce mcp: %s", ans)
	}
}

// isFailure reports a JSON-RPC error or a tool result with isError.
func isFailure(ans []byte) bool {
	var m struct {
		Error  json.RawMessage `json:"error"`
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	return json.Unmarshal(ans, &m) != nil || m.Error != nil || m.Result.IsError
}

// benchRequest is one request in each of the three forms measured.
type benchRequest struct {
	name          string
	method        string
	params        map[string]any
	legacyAllowed bool
}

func (q benchRequest) line(id int, meta bool) []byte {
	params := map[string]any{}
	for k, v := range q.params {
		params[k] = v
	}
	if meta {
		params["_meta"] = mcptest.Meta(mcptest.Version, mcptest.Caps(true), "ce-bench")
	}
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": q.method, "params": params})
	return append(raw, '\n')
}

func BenchmarkMCPBridge(b *testing.B) {
	dir := b.TempDir()
	file := newDoc(b, dir, "idea.md")
	s := startServe(b, dir, "serve", "idea.md", "--json", "--rate-limit", "0")
	ingress := strings.TrimSuffix(s.Banner.IngressURL, "/")
	modernState := filepath.Join(b.TempDir(), "m.json")
	modern := startPipeBridge(b, dir, inviteOnce(b, dir, file), modernState)
	legacy := startPipeBridge(b, dir, inviteOnce(b, dir, file), filepath.Join(b.TempDir(), "l.json"))
	legacy.roundTrip(b, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n"))
	modern.roundTrip(b, benchRequest{method: "tools/list"}.line(0, true))
	tok := readState(b, modernState).SessionToken
	task := createTask(b, httpClient, ingress, tok, "measure")
	direct := mcpClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}, ingress, tok, true)

	reqs := []benchRequest{
		{name: "tasks-get", method: "tasks/get", params: map[string]any{"taskId": task.taskID}},
		{name: "handoff-get", method: "tools/call", legacyAllowed: true,
			params: map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": task.handoffID}}},
	}
	for _, q := range reqs {
		directOnce := func() {
			raw, err := direct.Call(context.Background(), q.method, q.params)
			if err != nil || isFailure([]byte(`{"result":`+string(raw)+`}`)) {
				b.Fatalf("direct %s: %v %s", q.name, err, raw)
			}
		}
		b.Run(q.name+"/latency/direct", func(b *testing.B) { measureLatency(b, func(int) { directOnce() }) })
		b.Run(q.name+"/latency/bridge-2026-07-28", func(b *testing.B) {
			defer modern.reportCPU(b)()
			measureLatency(b, func(i int) { modern.roundTrip(b, q.line(i, true)) })
		})
		if q.legacyAllowed {
			b.Run(q.name+"/latency/bridge-2025-11-25", func(b *testing.B) {
				defer legacy.reportCPU(b)()
				measureLatency(b, func(i int) { legacy.roundTrip(b, q.line(i, false)) })
			})
		}
		b.Run(q.name+"/throughput/direct", func(b *testing.B) {
			b.SetParallelism(8) // 16 in flight on this 2-core machine
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					directOnce()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
		b.Run(q.name+"/throughput/bridge-2026-07-28", func(b *testing.B) {
			defer modern.reportCPU(b)()
			measureThroughput(b, modern, q, true)
		})
		if q.legacyAllowed {
			b.Run(q.name+"/throughput/bridge-2025-11-25", func(b *testing.B) {
				defer legacy.reportCPU(b)()
				measureThroughput(b, legacy, q, false)
			})
		}
	}
}

// measureLatency runs op one at a time and reports p50 and p99.
func measureLatency(b *testing.B, op func(i int)) {
	for i := range 20 { // warm the connections
		op(1_000_000 + i)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		op(i + 1)
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// measureThroughput keeps 16 requests in flight through the bridge.
func measureThroughput(b *testing.B, p *pipeBridge, q benchRequest, meta bool) {
	const inFlight = 16
	slots := make(chan struct{}, inFlight)
	done := make(chan struct{})
	var failed string
	go func() {
		defer close(done)
		for range b.N {
			ans, err := p.out.ReadBytes('\n')
			if err != nil || isFailure(ans) {
				failed = fmt.Sprintf("%v %s", err, ans)
				return
			}
			<-slots
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		select {
		case slots <- struct{}{}:
		case <-done:
			b.Fatalf("through ce mcp: %s", failed)
		}
		if _, err := p.in.Write(q.line(2_000_000+i, meta)); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	if failed != "" {
		b.Fatalf("through ce mcp: %s", failed)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
