// Package exec is the transport family for programs that are not Go
// libraries (an SSH tunnel, a corporate relay, the Python Commonroom's
// Tailcat): `--transport exec:NAME` runs `ce-transport-NAME`, found on PATH,
// and speaks a small line protocol with it.
//
//	ce-transport-NAME expose PORT
//	    Make 127.0.0.1:PORT (the room's ingress listener) reachable. When
//	    ready, print ONE line on stdout: a JSON hint
//	    {"type":"exec:NAME","address":…,"port":…,"encrypted":…,"mode":…,
//	     "ips":[…],"params":{…}} and keep running while exposing. Anything
//	    else on stdout first, an early exit, or no line within the time
//	    allowed is a failure. The program is ended (SIGTERM to its process
//	    group, SIGKILL after a grace) when ce stops or gives up.
//
//	ce-transport-NAME dial HINT_JSON
//	    Connect to the endpoint a hint of this type names, then print ONE
//	    status line on stdout, {"connected":true} or {"error":"why"}, and
//	    after {"connected":true} carry the connection's bytes: stdin to the
//	    endpoint, the endpoint to stdout (like `ssh -W`). End when stdin
//	    closes or the endpoint does.
//
// Both commands may write to stderr; ce logs each line after stripping
// what looks like a secret (transport.Redact). A child's environment is
// ce's, plus CE_TRANSPORT_STATE_DIR, a directory (mode 0700) it may keep
// state in. The README's "Transports" section is the reference.
package exec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/commonroom/ce/transport"
)

const (
	// Prefix starts every exec transport's name: "exec:NAME".
	Prefix = "exec:"
	// ProgramPrefix starts the program's name: ce-transport-NAME.
	ProgramPrefix = "ce-transport-"
	// StateDirEnv names, in the child's environment, the directory it may
	// keep state in (set when ce has one for the transport).
	StateDirEnv = "CE_TRANSPORT_STATE_DIR"

	// maxHintLine bounds the expose child's hint line; maxStatusLine the
	// dial child's status line.
	maxHintLine   = 64 << 10
	maxStatusLine = 4 << 10
	// killGrace is how long a child has to exit after SIGTERM before it
	// gets SIGKILL.
	killGrace = 2 * time.Second
	// stderrTail is how many of a child's last stderr lines an error quotes.
	stderrTail = 5
)

var (
	validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	validHost = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,252})$`)
)

// NewProvider is the provider of the transport called name ("exec:NAME");
// the program's main registers it for the "exec:" prefix.
func NewProvider(name string) transport.Provider { return provider{name: name} }

type provider struct{ name string }

func (p provider) Name() string           { return p.name }
func (p provider) AddFlags(*flag.FlagSet) {}

// Open finds ce-transport-NAME on PATH; a missing program is
// ErrUnavailable naming it.
func (p provider) Open(_ context.Context, opts transport.Options) (transport.Plugin, error) {
	short, ok := strings.CutPrefix(p.name, Prefix)
	if !ok || !validName.MatchString(short) {
		return nil, fmt.Errorf("%w: %q is not an exec transport (exec:NAME, NAME of letters, digits, '.', '_' and '-', at most 64)",
			transport.ErrUnavailable, p.name)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	prog := ProgramPrefix + short
	path, err := lookPath(prog, getenv("PATH"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrUnavailable, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plugin{name: p.name, prog: prog, path: path, stateDir: opts.StateDir,
		log: log, children: map[*child]struct{}{}}, nil
}

// lookPath finds an executable regular file named prog in the directories
// of path (empty entries are skipped: the current directory is never
// searched).
func lookPath(prog, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on PATH (install it, or put its directory on PATH)", prog)
}

// Plugin runs one exec transport's children.
type Plugin struct {
	name, prog, path string
	stateDir         string
	log              *slog.Logger

	mu       sync.Mutex
	closed   bool
	exposing *child
	children map[*child]struct{}
}

// Name is "exec:NAME".
func (p *Plugin) Name() string { return p.name }

// child is one running program.
type child struct {
	cmd  *osexec.Cmd
	done chan struct{} // closed once the child is reaped
	err  error         // Wait's answer, set before done closes
	tail *tailLines
	// stderrDone closes once its stderr reaches EOF, so an error can quote
	// its last words in full.
	stderrDone chan struct{}
	once       sync.Once
}

// start runs the program with args. stdout is the read end of its stdout;
// stdin, when asked for, the write end of its stdin (else it reads
// /dev/null). Its stderr is logged, redacted.
func (p *Plugin) start(withStdin bool, args ...string) (c *child, stdout, stdin *os.File, err error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, nil, nil, fmt.Errorf("%w: %s is closed", transport.ErrUnavailable, p.name)
	}
	cmd := osexec.Command(p.path, args...)
	cmd.Env = os.Environ()
	if p.stateDir != "" {
		cmd.Env = append(cmd.Env, StateDirEnv+"="+p.stateDir)
	}
	cmd.SysProcAttr = sysProcAttr()
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			for _, f := range parentEnds {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		return r, w
	}
	or, ow := pipe()
	er, ew := pipe()
	var ir, iw *os.File
	if withStdin {
		ir, iw = pipe()
	}
	if err != nil {
		for _, f := range []*os.File{or, ow, er, ew, ir, iw} {
			if f != nil {
				f.Close()
			}
		}
		return nil, nil, nil, fmt.Errorf("%w: %v", transport.ErrUnavailable, err)
	}
	parentEnds, childEnds = []*os.File{or, er}, []*os.File{ow, ew}
	cmd.Stdout, cmd.Stderr = ow, ew
	if withStdin {
		cmd.Stdin = ir
		parentEnds, childEnds = append(parentEnds, iw), append(childEnds, ir)
	}
	if err = cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: starting %s: %v", transport.ErrUnavailable, p.prog, err)
	}
	c = &child{cmd: cmd, done: make(chan struct{}), tail: &tailLines{max: stderrTail}, stderrDone: make(chan struct{})}
	go func() {
		defer close(c.stderrDone)
		p.logStderr(er, c.tail, args[0])
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
		p.mu.Lock()
		delete(p.children, c)
		p.mu.Unlock()
	}()
	p.mu.Lock()
	p.children[c] = struct{}{}
	closed = p.closed
	p.mu.Unlock()
	if closed { // Close ran while we started: it did not see this child
		p.end(c)
		err = fmt.Errorf("%w: %s is closed", transport.ErrUnavailable, p.name)
		return nil, nil, nil, err
	}
	return c, or, iw, nil
}

// end stops a child and its process group: SIGTERM, then SIGKILL after
// killGrace; it returns once the child is reaped.
func (p *Plugin) end(c *child) {
	c.once.Do(func() {
		pid := c.cmd.Process.Pid
		syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	<-c.done
}

// exitReason ends the child if it still runs and says how it ended, with
// the last lines it wrote to stderr (redacted).
func (p *Plugin) exitReason(c *child) string {
	p.end(c)
	select {
	case <-c.stderrDone:
	case <-time.After(time.Second): // a grandchild still holds stderr
	}
	why := "it exited with status 0"
	if c.err != nil {
		why = "it exited (" + c.err.Error() + ")"
	}
	if t := c.tail.String(); t != "" {
		why += "; its last words: " + t
	}
	return why
}

// logStderr logs each line the child writes to stderr, redacted.
func (p *Plugin) logStderr(r *os.File, tail *tailLines, cmd string) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := readLine(br, transport.MaxLogLine)
		if line != "" || err == nil {
			red := transport.Redact(line)
			tail.add(red)
			p.log.Info("transport output", "command", cmd, "line", red)
		}
		if errors.Is(err, errLongLine) {
			continue
		}
		if err != nil {
			return
		}
	}
}

var errLongLine = errors.New("line too long")

// readLine reads one line (without its newline) of at most max bytes. A
// longer line is errLongLine, and the rest of it is skipped.
func readLine(br *bufio.Reader, max int) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			return string(buf[:min(len(buf), max)]), errLongLine
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return string(buf), err
		}
	}
}

type lineResult struct {
	line string
	err  error
}

// Expose runs `ce-transport-NAME expose PORT` and waits, bounded by ctx,
// for its hint line.
func (p *Plugin) Expose(ctx context.Context, ingressAddr string) (transport.Hint, error) {
	_, port, err := net.SplitHostPort(ingressAddr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		return transport.Hint{}, fmt.Errorf("%w: bad ingress address %q", transport.ErrUnavailable, ingressAddr)
	}
	p.mu.Lock()
	busy := p.exposing != nil
	p.mu.Unlock()
	if busy {
		return transport.Hint{}, fmt.Errorf("%w: %s already exposes a room", transport.ErrUnavailable, p.name)
	}
	c, stdout, _, err := p.start(false, "expose", port)
	if err != nil {
		return transport.Hint{}, err
	}
	lines := make(chan lineResult, 1)
	go func() {
		defer stdout.Close()
		br := bufio.NewReaderSize(stdout, 4096)
		line, err := readLine(br, maxHintLine)
		lines <- lineResult{line, err}
		if err != nil {
			return
		}
		// Keep draining, so the child never blocks on a full pipe.
		for {
			more, err := readLine(br, transport.MaxLogLine)
			if more != "" {
				p.log.Warn("transport output after its hint, ignored", "line", transport.Redact(more))
			}
			if err != nil && !errors.Is(err, errLongLine) {
				return
			}
		}
	}()
	fail := func(format string, a ...any) (transport.Hint, error) {
		p.end(c)
		return transport.Hint{}, fmt.Errorf("%w: %s expose: "+format, append([]any{transport.ErrUnavailable, p.prog}, a...)...)
	}
	var r lineResult
	select {
	case r = <-lines:
	case <-c.done:
		// What it printed before dying says more than its death.
		select {
		case r = <-lines:
			if r.err == nil {
				if _, err := parseHint(r.line, p.name); err != nil {
					return fail("%v", err)
				}
			}
		case <-time.After(time.Second):
		}
		return fail("it stopped before it was ready: %s", p.exitReason(c))
	case <-ctx.Done():
		return fail("no hint within the time allowed (%v)", context.Cause(ctx))
	}
	if r.err != nil {
		if errors.Is(r.err, errLongLine) {
			return fail("its first line on stdout is longer than %d bytes, not a hint", maxHintLine)
		}
		return fail("it printed no hint: %s", p.exitReason(c))
	}
	h, err := parseHint(r.line, p.name)
	if err != nil {
		return fail("%v", err)
	}
	p.mu.Lock()
	p.exposing = c
	p.mu.Unlock()
	go func() {
		<-c.done
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			p.log.Error("the transport program stopped; the room is no longer reachable through it", "reason", p.exitReason(c))
		}
	}()
	return h, nil
}

// parseHint reads the expose child's one line: a JSON hint of this
// transport's type with an address and a port that can go into a Host
// header.
func parseHint(line, name string) (transport.Hint, error) {
	var h transport.Hint
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		why := "trailing data"
		if err != nil {
			why = err.Error()
		}
		return h, fmt.Errorf("its first line on stdout is not a JSON hint (%s): %q", why, cut(transport.Redact(line), 80))
	}
	if _, err := dec.Token(); err != io.EOF {
		return h, fmt.Errorf("its first line on stdout has more after the hint: %q", cut(transport.Redact(line), 80))
	}
	switch {
	case h.Type == "":
		h.Type = name
	case h.Type != name:
		return h, fmt.Errorf("its hint is of type %q, not %q", h.Type, name)
	}
	if !validHost.MatchString(h.Address) && net.ParseIP(h.Address) == nil {
		return h, fmt.Errorf("its hint's address %q is not a host name or IP address", cut(h.Address, 80))
	}
	for _, ip := range h.IPs {
		if net.ParseIP(ip) == nil {
			return h, fmt.Errorf("its hint's ips hold %q, which is not an IP address", cut(ip, 80))
		}
	}
	if h.Port < 1 || h.Port > 65535 {
		return h, fmt.Errorf("its hint has no port (1..65535)")
	}
	switch h.Mode {
	case "local", "private", "public":
	default:
		return h, fmt.Errorf("its hint's mode is %q, not local, private or public", cut(h.Mode, 40))
	}
	return h, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// dialStatus is the dial child's first line.
type dialStatus struct {
	Connected bool   `json:"connected"`
	Error     string `json:"error"`
}

// Dial runs `ce-transport-NAME dial HINT_JSON` and, once the child says it
// is connected, returns a connection carried on its stdin and stdout.
func (p *Plugin) Dial(ctx context.Context, h transport.Hint) (net.Conn, error) {
	if h.Type != p.name {
		return nil, fmt.Errorf("%w: a %q hint is not for %s", transport.ErrUnavailable, h.Type, p.name)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrUnavailable, err)
	}
	c, stdout, stdin, err := p.start(true, "dial", string(b))
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(stdout, 32<<10)
	status := make(chan lineResult, 1)
	go func() {
		line, err := readLine(br, maxStatusLine)
		status <- lineResult{line, err}
	}()
	fail := func(format string, a ...any) (net.Conn, error) {
		stdin.Close()
		stdout.Close()
		p.end(c)
		return nil, fmt.Errorf("%w: %s dial: "+format, append([]any{transport.ErrUnavailable, p.prog}, a...)...)
	}
	var r lineResult
	select {
	case r = <-status:
	case <-c.done:
		// It may have said why and exited at once: prefer its words.
		select {
		case r = <-status:
			if r.err == nil && strings.Contains(r.line, `"connected"`) {
				return fail("it exited right after connecting: %s", p.exitReason(c))
			}
		case <-time.After(time.Second):
			return fail("%s", p.exitReason(c))
		}
	case <-ctx.Done():
		return fail("not connected within the time allowed (%v)", context.Cause(ctx))
	}
	if r.err != nil {
		if errors.Is(r.err, errLongLine) {
			return fail("its status line is longer than %d bytes", maxStatusLine)
		}
		return fail("it said nothing: %s", p.exitReason(c))
	}
	var st dialStatus
	dec := json.NewDecoder(strings.NewReader(r.line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || (st.Connected == (st.Error != "")) {
		return fail(`its status line is neither {"connected":true} nor {"error":"…"}: %q`, cut(transport.Redact(r.line), 80))
	}
	if !st.Connected {
		return fail("%s", cut(transport.Redact(st.Error), 200))
	}
	return &pipeConn{r: br, rf: stdout, w: stdin, c: c, p: p}, nil
}

// Close ends every child (the exposing one and every dial), and returns
// once all are reaped.
func (p *Plugin) Close() error {
	p.mu.Lock()
	p.closed = true
	var cs []*child
	for c := range p.children {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); p.end(c) }()
	}
	wg.Wait()
	return nil
}

// pipeConn is a connection carried on a dial child's stdin and stdout.
type pipeConn struct {
	r    *bufio.Reader
	rf   *os.File // the read end of the child's stdout, under r
	w    *os.File // the write end of its stdin
	c    *child
	p    *Plugin
	once sync.Once
}

func (pc *pipeConn) Read(b []byte) (int, error)  { return pc.r.Read(b) }
func (pc *pipeConn) Write(b []byte) (int, error) { return pc.w.Write(b) }

// Close closes both pipes and ends the child in the background (it is
// reaped within killGrace).
func (pc *pipeConn) Close() error {
	pc.once.Do(func() {
		pc.w.Close()
		pc.rf.Close()
		go pc.p.end(pc.c)
	})
	return nil
}

func (pc *pipeConn) LocalAddr() net.Addr  { return execAddr("ce") }
func (pc *pipeConn) RemoteAddr() net.Addr { return execAddr(pc.p.prog) }
func (pc *pipeConn) SetDeadline(t time.Time) error {
	return errors.Join(pc.rf.SetReadDeadline(t), pc.w.SetWriteDeadline(t))
}
func (pc *pipeConn) SetReadDeadline(t time.Time) error  { return pc.rf.SetReadDeadline(t) }
func (pc *pipeConn) SetWriteDeadline(t time.Time) error { return pc.w.SetWriteDeadline(t) }

// execAddr names the ends of a pipe connection.
type execAddr string

func (a execAddr) Network() string { return "exec" }
func (a execAddr) String() string  { return string(a) }

// tailLines keeps the last few lines a child wrote to stderr.
type tailLines struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailLines) add(s string) {
	if strings.TrimSpace(s) == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, cut(s, 300))
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailLines) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	for i, l := range t.lines {
		if i > 0 {
			b.WriteString(" | ")
		}
		b.WriteString(l)
	}
	return b.String()
}
