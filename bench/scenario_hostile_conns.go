package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The hostile-connections reproduction (issue 13, items 6 and 7): clients
// that hold connections or answers without finishing them, against a real
// `ce serve`, with the server's descriptors (/proc/PID/fd) and resident
// memory (VmRSS) sampled while they hang and after the server's deadlines.
// --hostile-bin runs it against another build (an older one, for a
// before/after); the deadlines are then ce's defaults and the wait is
// --hostile-wait. With --smoke and the built ce, the room gets 1 s / 2 s
// deadlines and the phases are small.

// hostilePhase is one group of hanging clients.
type hostilePhase struct {
	What    string `json:"what"`
	Clients int    `json:"clients"`
	// AnswerBytes is the size of one answer, read once by a client that
	// reads (0 when the phase's requests are not answered in full).
	AnswerBytes int64   `json:"answer_bytes,omitempty"`
	FDsBefore   int     `json:"fds_before"`
	FDsDuring   int     `json:"fds_during"`
	FDsAfter    int     `json:"fds_after_deadline"`
	SockBefore  int     `json:"sockets_before"`
	SockDuring  int     `json:"sockets_during"`
	SockAfter   int     `json:"sockets_after_deadline"`
	RSSBefore   float64 `json:"rss_mib_before"`
	RSSPeak     float64 `json:"rss_mib_peak_until_after"` // sampled every 250 ms from the first request to the end of the wait
	RSSAfter    float64 `json:"rss_mib_after_deadline"`
	// HeapBefore and HeapAfter are the server's live heap after a forced
	// GC (/debug/pprof/heap?gc=1): RSS stays up after memory is freed, the
	// live heap shows whether the hanging requests still hold it.
	HeapBefore float64 `json:"live_heap_mib_before"`
	HeapAfter  float64 `json:"live_heap_mib_after_deadline"`
	Note       string  `json:"note,omitempty"`
}

// hostileFlood is the descriptor-exhaustion phase: more connections than
// the server's open-file limit, each with a partial body, and whether the
// owner listener still answers.
type hostileFlood struct {
	FileLimit    int     `json:"server_open_file_limit"`
	Attempted    int     `json:"connections_attempted"`
	Opened       int     `json:"connections_opened"`
	OwnerAnswers bool    `json:"owner_answers_during_flood"`
	OwnerMs      float64 `json:"owner_healthz_ms,omitempty"`
	OwnerErr     string  `json:"owner_error,omitempty"`
	Refused      int64   `json:"ingress_refused,omitempty"` // from /debug/metrics, when the build counts them
}

type hostileResult struct {
	Binary      string             `json:"binary"`
	Flags       []string           `json:"ce_flags"`
	WaitSeconds float64            `json:"wait_seconds"`
	Phases      []hostilePhase     `json:"phases"`
	SecondPeer  *hostileSecondPeer `json:"second_peer,omitempty"`
	Flood       *hostileFlood      `json:"flood,omitempty"`
}

// hostileSizes are the phase sizes: the in a full run, small ones
// in a smoke run.
type hostileSizes struct {
	partial, proposals, proposalReaders, docMiB, docReaders, floodLimit int
}

func scenarioHostileConns(ctx context.Context, e *env) error {
	bin, flags, wait := e.bin, []string(nil), e.cfg.hostileWait
	if e.cfg.hostileBin != "" {
		bin = e.cfg.hostileBin
	} else if e.cfg.smoke {
		flags = []string{"--body-timeout", "1s", "--write-timeout", "2s"}
		wait = 5 * time.Second
	}
	if bin == "" {
		return errors.New("hostile_conns needs a ce binary (it cannot run against --target-file)")
	}
	sz := hostileSizes{partial: 200, proposals: 200, proposalReaders: 20, docMiB: 20, docReaders: 30, floodLimit: 2048}
	if e.cfg.smoke {
		// 24 proposals made a 6 MB listing before listings were paged:
		// more than the kernel's socket buffers take.
		sz = hostileSizes{partial: 40, proposals: 24, proposalReaders: 4, docMiB: 2, docReaders: 4, floodLimit: 512}
	}
	res := &hostileResult{Binary: bin, Flags: flags, WaitSeconds: wait.Seconds()}
	e.rep.mu.Lock()
	e.rep.Hostile = res
	e.rep.mu.Unlock()
	e.rep.header(fmt.Sprintf("hostile connections (%s; waits %s for the deadlines)", filepath.Base(bin), wait))

	c, err := e.hostileRoom(ctx, bin, "hostile", roomDocument, "", flags)
	if err != nil {
		return err
	}
	p, err := hostilePartialBodies(ctx, c, sz.partial, wait)
	if err != nil {
		e.release(c)
		return err
	}
	e.hostileRecord(res, p, "partial bodies left unread", p.SockAfter-p.SockBefore > max(2, sz.partial/20))
	p, err = hostileProposals(ctx, e, c, sz, wait)
	e.release(c)
	if err != nil {
		return err
	}
	// An answer larger than the kernel's socket buffers (the unpaged
	// listing of before: 6 MB in a smoke run, 49 MB in a full one) holds
	// the server's writer, so the write deadline must end its connection.
	// A paged listing is a few KB: it fits in those buffers, the handler
	// finishes, and the connection waits for the idle timeout like a read.
	e.hostileRecord(res, p, "unread proposal listings", p.AnswerBytes > 8<<20 && p.SockAfter-p.SockBefore > 0)

	doc := "# Big\n\n" + strings.Repeat(strings.Repeat("lorem ipsum ", 8)+"\n", sz.docMiB<<20/97)
	c, err = e.hostileRoom(ctx, bin, "hostile-doc", doc, "", flags)
	if err != nil {
		return err
	}
	p, err = hostileReads(ctx, c, sz.docReaders, sz.docMiB, wait)
	e.release(c)
	if err != nil {
		return err
	}
	e.hostileRecord(res, p, "unread reads", false) // see hostileReads: a read answer may fit in the kernel's buffers

	sp, err := e.hostileSecondPeerPhase(ctx, bin, flags)
	if err != nil {
		return err
	}
	e.rep.mu.Lock()
	res.SecondPeer = sp
	e.rep.mu.Unlock()

	if _, err := exec.LookPath("prlimit"); err != nil {
		e.rep.row("hostile", "descriptor flood", "skipped", "prlimit(1) is not installed")
		return nil
	}
	c, err = e.hostileRoom(ctx, bin, "hostile-flood", roomDocument, fmt.Sprintf("--nofile=%d:%d", sz.floodLimit, sz.floodLimit), flags)
	if err != nil {
		return err
	}
	defer e.release(c)
	f := hostileFloodPhase(ctx, c, sz.floodLimit)
	res.Flood = f
	e.rep.row("hostile", fmt.Sprintf("flood of %d partial bodies, open-file limit %d", f.Attempted, f.FileLimit),
		fmt.Sprintf("%d opened", f.Opened), fmt.Sprintf("owner answers: %v %s%s", f.OwnerAnswers, f.OwnerErr,
			map[bool]string{true: fmt.Sprintf("; %d refused", f.Refused), false: ""}[f.Refused > 0]))
	if !f.OwnerAnswers {
		e.rep.violation(fmt.Sprintf("hostile: the owner listener did not answer while %d connections flooded the ingress (%s)", f.Attempted, f.OwnerErr))
	}
	return nil
}

// hostileRecord prints and keeps one phase; held says its connections were
// still held after the wait, which breaks the invariant that every
// connection ends within the server's deadlines.
func (e *env) hostileRecord(res *hostileResult, p hostilePhase, what string, held bool) {
	e.rep.mu.Lock()
	res.Phases = append(res.Phases, p)
	e.rep.mu.Unlock()
	e.rep.row("hostile", fmt.Sprintf("%d %s: server fds before / during / after", p.Clients, what),
		fmt.Sprintf("%d / %d / %d", p.FDsBefore, p.FDsDuring, p.FDsAfter), p.Note)
	e.rep.row("hostile", "  of which sockets", fmt.Sprintf("%d / %d / %d", p.SockBefore, p.SockDuring, p.SockAfter), "")
	e.rep.row("hostile", "  RSS MiB before / peak / after", fmt.Sprintf("%.0f / %.0f / %.0f", p.RSSBefore, p.RSSPeak, p.RSSAfter),
		map[bool]string{true: fmt.Sprintf("one answer %.1f MiB", float64(p.AnswerBytes)/(1<<20)), false: ""}[p.AnswerBytes > 0])
	e.rep.row("hostile", "  live heap MiB after a GC: before / after", fmt.Sprintf("%.0f / %.0f", p.HeapBefore, p.HeapAfter), "")
	if held {
		e.rep.violation(fmt.Sprintf("hostile: %d %s: %d connections still held %.0fs later", p.Clients, what, p.SockAfter-p.SockBefore, res.WaitSeconds))
	}
}

// hostileRoom serves text with bin in a directory of its own; nofile, when
// set, runs it under prlimit with that open-file limit.
func (e *env) hostileRoom(ctx context.Context, bin, name, text, nofile string, flags []string) (*ceServer, error) {
	e.mu.Lock()
	e.seq++
	dir := filepath.Join(e.workDir, fmt.Sprintf("%02d-%s", e.seq, name))
	e.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "room.md")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return nil, err
	}
	if nofile != "" {
		// prlimit sets the limit and execs ce, so the pid is ce's.
		wrapper := filepath.Join(dir, "ce-limited")
		script := fmt.Sprintf("#!/bin/sh\nexec prlimit %s -- %q \"$@\"\n", nofile, bin)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			return nil, err
		}
		bin = wrapper
	}
	return e.track(serveCE(ctx, bin, file, filepath.Join(dir, "room.ce.log"), flags...))
}

// fdCount is how many descriptors process pid has open, and how many of
// them are sockets (the listeners and connections; the rest are files,
// which the read pool opens more of under concurrent reads).
func fdCount(pid int) (fds, sockets int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1, -1
	}
	for _, ent := range ents {
		if l, err := os.Readlink(filepath.Join(dir, ent.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			sockets++
		}
	}
	return len(ents), sockets
}

func (c *ceServer) rssMiB() float64 {
	kb, err := c.rssKB()
	if err != nil {
		return -1
	}
	return float64(kb) / 1024
}

// hostileSession joins one session with caps on a fresh reusable invitation.
func hostileSessions(ctx context.Context, c *ceServer, n int, caps ...string) ([]session, error) {
	inv, err := c.invite(ctx, caps...)
	if err != nil {
		return nil, err
	}
	return joinMany(ctx, c.hc, c.ingressURL, inv, "hostile", n)
}

// dialStalled connects to url's host with a tiny receive buffer, so an
// answer it never reads stops the server's writes after a few kilobytes.
func dialStalled(ctx context.Context, url string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	return d.DialContext(ctx, "tcp", strings.TrimPrefix(url, "http://"))
}

// hang opens n connections that send request(i) and never read, and
// samples the server while they hang and after wait. It returns with every
// connection closed from this side.
func hang(ctx context.Context, c *ceServer, n int, wait time.Duration, request func(i int) string) (hostilePhase, error) {
	// The bench's own pooled connections are not the phase's: close them,
	// and give the server a moment to notice.
	c.hc.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	p := hostilePhase{Clients: n, RSSBefore: c.rssMiB(), HeapBefore: liveHeapMiB(ctx, c)}
	p.FDsBefore, p.SockBefore = fdCount(c.pid)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	start := time.Now()
	for i := range n {
		conn, err := dialStalled(ctx, c.ingressURL)
		if err != nil {
			return p, fmt.Errorf("connection %d: %w", i, err)
		}
		conns = append(conns, conn)
		if _, err := io.WriteString(conn, request(i)); err != nil {
			return p, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	p.RSSPeak = p.RSSBefore
	for time.Now().Before(start.Add(wait)) {
		p.RSSPeak = max(p.RSSPeak, c.rssMiB())
		fds, socks := fdCount(c.pid)
		p.FDsDuring, p.SockDuring = max(p.FDsDuring, fds), max(p.SockDuring, socks)
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
	p.FDsAfter, p.SockAfter = fdCount(c.pid)
	p.RSSAfter = c.rssMiB()
	p.HeapAfter = liveHeapMiB(ctx, c)
	return p, nil
}

// hostilePartialBodies: unauthenticated requests that send their headers
// and part of a body, to routes that never read it.
func hostilePartialBodies(ctx context.Context, c *ceServer, n int, wait time.Duration) (hostilePhase, error) {
	p, err := hang(ctx, c, n, wait, func(i int) string {
		target := "GET /healthz"
		if i%2 == 1 {
			target = "POST /workspace/status"
		}
		return target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"partial\":"
	})
	p.What = "GET /healthz and POST /workspace/status, headers and 11 of 1,000 body bytes, no session"
	return p, err
}

// hostileProposals: many large pending proposals, then listings nobody reads.
func hostileProposals(ctx context.Context, e *env, c *ceServer, sz hostileSizes, wait time.Duration) (hostilePhase, error) {
	ss, err := hostileSessions(ctx, c, 8, "read", "propose")
	if err != nil {
		return hostilePhase{}, err
	}
	content := strings.Repeat("proposal text ", 250<<10/14)
	created, note := 0, ""
	for i := range sz.proposals {
		body, _ := json.Marshal(map[string]any{"target": "Notes", "base_version": 1, "summary": fmt.Sprint("large proposal ", i),
			"change": map[string]any{"section": "Notes", "content": fmt.Sprint(i, content)}})
		status, b, err := postJSON(ctx, c.hc, c.ingressURL+"/workspace/propose", http.Header{"Authorization": {"Bearer " + ss[i%len(ss)].Token}}, body)
		if err != nil {
			return hostilePhase{}, err
		}
		if status == http.StatusTooManyRequests || status == http.StatusConflict {
			note = fmt.Sprintf("the room refused proposal %d: %s", i+1, clip(b))
			break
		}
		if status != http.StatusOK {
			return hostilePhase{}, fmt.Errorf("propose: HTTP %d: %s", status, clip(b))
		}
		created++
	}
	size, err := answerSize(ctx, c, "/workspace/proposals", ss[0].Token)
	if err != nil {
		return hostilePhase{}, err
	}
	p, err := hang(ctx, c, sz.proposalReaders, wait, func(i int) string {
		return "GET /workspace/proposals HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ss[i%len(ss)].Token + "\r\n\r\n"
	})
	p.What = fmt.Sprintf("GET /workspace/proposals over %d pending proposals of 250 KB, never read", created)
	p.AnswerBytes, p.Note = size, note
	return p, err
}

// hostileReads: reads of a large document nobody reads. An answer is at
// most the 1 MiB read bound, so it may fit whole in the kernel's socket
// buffers; the handler then finishes and the connection waits for the idle
// timeout (2 min), holding kernel memory, not the server's.
func hostileReads(ctx context.Context, c *ceServer, n, docMiB int, wait time.Duration) (hostilePhase, error) {
	ss, err := hostileSessions(ctx, c, 1, "read")
	if err != nil {
		return hostilePhase{}, err
	}
	// The reads come first, on a room that has not answered one yet, as
	// an attacker's would: they find no parsed document to share.
	p, err := hang(ctx, c, n, wait, func(int) string {
		return "GET /workspace/read HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ss[0].Token + "\r\n\r\n"
	})
	p.What = fmt.Sprintf("GET /workspace/read of a %d MiB document, never read", docMiB)
	if err != nil {
		return p, err
	}
	p.AnswerBytes, err = answerSize(ctx, c, "/workspace/read", ss[0].Token)
	return p, err
}

// answerSize reads path once as a client that reads, for the answer's size.
func answerSize(ctx context.Context, c *ceServer, path, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ingressURL+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	n, err := io.Copy(io.Discard, res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d", path, res.StatusCode)
	}
	return n, err
}

// hostileFloodPhase opens more connections than the server may hold
// descriptors, each with a partial body, then asks the owner listener for
// /healthz.
func hostileFloodPhase(ctx context.Context, c *ceServer, limit int) *hostileFlood {
	f := &hostileFlood{FileLimit: limit, Attempted: limit + 500}
	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	d := net.Dialer{Timeout: 2 * time.Second}
	addr := strings.TrimPrefix(c.ingressURL, "http://")
	for range f.Attempted {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			continue // the backlog is full: the server stopped accepting
		}
		conns = append(conns, conn)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{\"partial\":")
	}
	f.Opened = len(conns)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	res, err := hc.Get(strings.TrimSuffix(c.ownerURL, "/") + "/healthz")
	if err == nil {
		res.Body.Close()
		f.OwnerAnswers = res.StatusCode == http.StatusOK
		f.OwnerMs = float64(time.Since(start).Microseconds()) / 1000
		if !f.OwnerAnswers {
			f.OwnerErr = res.Status
		}
	} else {
		f.OwnerErr = err.Error()
	}
	var m struct {
		Connections map[string]struct {
			Refused int64 `json:"refused"`
		} `json:"connections"`
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.ownerCall(mctx, http.MethodGet, "/debug/metrics", nil, &m) == nil {
		f.Refused = m.Connections["ingress"].Refused
	}
	return f
}

// liveHeapMiB is the server's HeapAlloc right after a forced GC, read from
// the operator's /debug/pprof/heap?gc=1&debug=1 (-1 when unavailable).
func liveHeapMiB(ctx context.Context, c *ceServer) float64 {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.ownerURL, "/")+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return -1
	}
	req.Header.Set("Authorization", "Bearer "+c.opToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return -1
	}
	_, rest, ok := strings.Cut(string(b), "\n# HeapAlloc = ")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
	if err != nil {
		return -1
	}
	return float64(n) / (1 << 20)
}
