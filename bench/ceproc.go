package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
)

// ceServer is one `ce serve` the bench talks to: either a child it started
// (and must kill) or a running room named by --target-file. Everything it
// knows comes from the scriptable contract (DESIGN.md §10): the --json
// banner and the operator credential file.
type ceServer struct {
	proc       *cetest.Proc // nil for a --target-file room: never ours to stop
	pid        int
	file       string
	bin        string   // the binary and flags it was started with, so it can be served again
	flags      []string // (the preload's bulk mode stops the room, fills its sidecar, restarts it)
	ownerURL   string
	ingressURL string
	opToken    string
	logPath    string // the child's stderr
	hc         *http.Client
}

// ownerCredential is the part of <FILE>.commonroom.owner the bench reads.
type ownerCredential struct {
	PID           int    `json:"pid"`
	OwnerURL      string `json:"owner_url"`
	IngressURL    string `json:"ingress_url"`
	OperatorToken string `json:"operator_token"`
}

func readOwnerCredential(file string) (ownerCredential, error) {
	var oc ownerCredential
	b, err := os.ReadFile(file + ".commonroom.owner")
	if err != nil {
		return oc, err
	}
	if err := json.Unmarshal(b, &oc); err != nil {
		return oc, err
	}
	if oc.OwnerURL == "" || oc.OperatorToken == "" || oc.IngressURL == "" {
		return oc, errors.New("incomplete operator credential")
	}
	return oc, nil
}

const roomDocument = "# Bench room\n\nA room opened by `go run ./bench`.\n\n## Plan\n\nNothing yet.\n\n## Notes\n\nNone.\n"

// startCE runs `ce serve` on a fresh document in its own directory and waits
// for the ready banner.
func startCE(ctx context.Context, bin, dir, name string, flags ...string) (*ceServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, name+".md")
	if err := os.WriteFile(file, []byte(roomDocument), 0o644); err != nil {
		return nil, err
	}
	return serveCE(ctx, bin, file, filepath.Join(dir, name+".ce.log"), flags...)
}

// serveCE runs `ce serve` on a document that already exists, with or without
// a sidecar, and waits for the ready banner. The child gets SIGKILL if the
// bench dies without cleaning up (Pdeathsig), so an interrupted run never
// leaves a room behind. The log is appended to, so a room served again keeps
// one log for all its lives.
func serveCE(ctx context.Context, bin, file, logPath string, flags ...string) (*ceServer, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	args := append([]string{"serve", file, "--json", "--log-level", "warn"}, flags...)
	p, err := cetest.StartWith(bin, cetest.Options{Stderr: logf, InheritEnv: true, DieWithParent: true}, args...)
	if err != nil {
		return nil, err
	}
	c := &ceServer{proc: p, file: file, bin: bin, flags: flags, logPath: logPath, pid: p.Pid(),
		hc: &http.Client{Timeout: 30 * time.Second}}
	err = awaitReady(ctx, p, "ce serve", logPath, func(line string) error {
		var b struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			return err
		}
		if b.PID != c.pid {
			return fmt.Errorf("banner pid %d is not the child's %d", b.PID, c.pid)
		}
		return nil
	})
	if err != nil {
		c.stop()
		return nil, err
	}
	oc, err := readOwnerCredential(file)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("reading the operator credential: %v", err)
	}
	c.ownerURL, c.ingressURL, c.opToken = oc.OwnerURL, oc.IngressURL, oc.OperatorToken
	return c, nil
}

// attachCE targets a room someone else is serving; the bench never stops it.
func attachCE(file string) (*ceServer, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	oc, err := readOwnerCredential(abs)
	if err != nil {
		return nil, fmt.Errorf("--target-file %s: %v (is it being served?)", file, err)
	}
	return &ceServer{file: abs, pid: oc.PID, ownerURL: oc.OwnerURL, ingressURL: oc.IngressURL, opToken: oc.OperatorToken,
		hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

// stop ends a child gracefully (SIGTERM, as a user's Ctrl-C would) and kills
// it if it has not exited within 15s. It does nothing for a target room.
func (c *ceServer) stop() error {
	if c == nil || c.proc == nil {
		return nil
	}
	p := c.proc
	c.proc = nil
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		return p.Err()
	case <-time.After(15 * time.Second):
		p.Cmd.Process.Kill()
		<-p.Done()
		return errors.New("ce serve did not stop within 15s of SIGTERM and was killed")
	}
}

// owned reports whether the bench started this room (and may restart or
// reconfigure rooms like it).
func (c *ceServer) owned() bool { return c.proc != nil }

// rssKB is the room process's resident set (VmRSS) in KiB.
func (c *ceServer) rssKB() (int64, error) { return procStatusKB(c.pid, "VmRSS") }

// memKB is the room process's resident set and its peak so far (VmHWM),
// in KiB.
func (c *ceServer) memKB() (rss, peak int64, err error) {
	if rss, err = procStatusKB(c.pid, "VmRSS"); err != nil {
		return 0, 0, err
	}
	peak, err = procStatusKB(c.pid, "VmHWM")
	return rss, peak, err
}

// procStatusKB reads one "Name: N kB" line of /proc/<pid>/status.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s line", field)
}

// tail returns the last lines of the child's log, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// ownerCall sends one request to the owner listener with the operator
// credential (what `ce invite` does while a room is serving).
func (c *ceServer) ownerCall(ctx context.Context, method, path string, body, out any) error {
	r, err := mcptest.Do(ctx, c.hc, method, c.ownerURL+path, c.opToken, body)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, r.Status, clip(r.Raw))
	}
	if out != nil {
		return json.Unmarshal(r.Raw, out)
	}
	return nil
}

// roomMetrics is the part of GET /debug/metrics the bench reads. Only live
// figures are read: the room's "handoffs" and "task_rows" totals are cached
// for up to 5 s, so a scenario that needs them counts what it created.
type roomMetrics struct {
	Room struct {
		ActiveTasks int `json:"active_tasks"`
		LiveSess    int `json:"live_sessions"`
	} `json:"room"`
	Writer struct {
		Commands   int64 `json:"commands"`
		Failed     int64 `json:"failed"`
		Batches    int64 `json:"batches"`
		Overloaded int64 `json:"overloaded"`
		// CPUSeconds is the writer goroutine's cumulative CPU time, nil
		// on a room that does not report it.
		CPUSeconds *float64 `json:"cpu_seconds"`
	} `json:"writer"`
	Listen struct {
		Subscribers      int    `json:"subscribers"`
		Pending          int    `json:"pending_batches"`
		Delivered        uint64 `json:"delivered"`
		Dropped          uint64 `json:"dropped"`
		DroppedQueueFull uint64 `json:"dropped_queue_full"`
		DroppedSlow      uint64 `json:"dropped_slow"`
		Disconnected     uint64 `json:"disconnected"`
	} `json:"listen"`
}

func (c *ceServer) metrics(ctx context.Context) (roomMetrics, error) {
	var m roomMetrics
	err := c.ownerCall(ctx, http.MethodGet, "/debug/metrics", nil, &m)
	return m, err
}

// invite mints a reusable invitation with exactly these capabilities.
func (c *ceServer) invite(ctx context.Context, caps ...string) (string, error) {
	var g struct {
		URI string `json:"uri"`
	}
	err := c.ownerCall(ctx, http.MethodPost, "/workspace/invite", map[string]any{
		"capabilities": caps, "max_uses": 0, "expires_in_minutes": 600,
	}, &g)
	if err == nil && g.URI == "" {
		err = errors.New("invite answer without uri")
	}
	return g.URI, err
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// awaitReady waits until a child process the bench started has printed its
// ready line and check accepts it, and fails if the child exits first, stays
// silent for 30 s, or ctx ends.
func awaitReady(ctx context.Context, p *cetest.Proc, what, logPath string, check func(line string) error) error {
	line, err := p.FirstLineCtx(ctx, 30*time.Second)
	switch {
	case errors.Is(err, cetest.ErrNoLine):
		return fmt.Errorf("%s exited before it was ready (%v): %s", what, p.Err(), tail(logPath))
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("%s printed no ready line within 30s", what)
	}
	if err := check(line); err != nil {
		return fmt.Errorf("%s printed no usable ready line (%v): %s", what, err, tail(logPath))
	}
	return nil
}
