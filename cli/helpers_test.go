package cli

// Helpers for the tests that run the real `ce` binary: TestMain builds it
// once, and each test starts its own `ce serve` in its own temporary
// directory. Every child is killed in t.Cleanup; nothing waits by sleeping —
// the tests wait on the process, on its JSON line, or (for files only) poll
// a condition with a deadline.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/transport/exec/exectest"
)

// ceBin is the binary TestMain built; set once before any test runs.
var ceBin string

const (
	readyTimeout = 20 * time.Second // for `ce serve` to print its JSON line
	stopTimeout  = 15 * time.Second // for a signalled `ce serve` to exit
	runTimeout   = 20 * time.Second // for a one-shot command
	fileTimeout  = 10 * time.Second // for a file to appear or go away
)

func TestMain(m *testing.M) {
	exectest.RunIfPlugin() // this binary is also the exec transport plugin the tests run
	os.Exit(cetest.Main(m, "cli", &ceBin))
}

// notifyBuffer is a goroutine-safe buffer that signals every write.
type notifyBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{} // capacity 1: "something was written"
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{notify: make(chan struct{}, 1)} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return n, err
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// banner is the one JSON line `ce serve --json` prints when ready.
type banner struct {
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	OwnerURL    string `json:"owner_url"`
	IngressURL  string `json:"ingress_url"`
	MCPURL      string `json:"mcp_url"`
	Invite      string `json:"invite"`
	PID         int    `json:"pid"`
}

var bannerKeys = []string{"workspace_id", "name", "version", "owner_url", "ingress_url", "mcp_url", "invite", "pid"}

// server is one running `ce serve` child.
type server struct {
	t      testing.TB
	dir    string
	cmd    *exec.Cmd
	stdout *notifyBuffer
	stderr *notifyBuffer
	done   chan struct{} // closed once the child has been waited for
	state  *os.ProcessState

	// Line is the raw JSON line; Banner its decoded form (after ready).
	Line   string
	Banner banner
}

// startServe starts `ce ARGS...` in dir and waits for its JSON line (the
// args must make it print one: `serve FILE --json` or `FILE --json`).
func startServe(t testing.TB, dir string, args ...string) *server {
	t.Helper()
	s := spawnServe(t, dir, nil, args...)
	s.ready()
	return s
}

// spawnServe starts the child without waiting for anything.
func spawnServe(t testing.TB, dir string, env []string, args ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, stdout: newNotifyBuffer(), stderr: newNotifyBuffer(), done: make(chan struct{})}
	s.cmd = exec.Command(ceBin, args...)
	s.cmd.Dir = dir
	s.cmd.Env = cetest.ChildEnv(env...)
	s.cmd.Stdout = s.stdout
	s.cmd.Stderr = s.stderr
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting ce %v: %v", args, err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.done)
	}()
	t.Cleanup(func() {
		if !s.exited() {
			s.cmd.Process.Kill()
			select {
			case <-s.done:
			case <-time.After(stopTimeout):
				t.Errorf("ce %v (pid %d) did not die after SIGKILL", args, s.cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("ce %v stdout:\n%s\nstderr:\n%s", args, s.stdout.String(), s.stderr.String())
		}
	})
	return s
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ready waits for the first line on stdout and decodes it.
func (s *server) ready() {
	s.t.Helper()
	s.readyWithin(readyTimeout)
}

// readyWithin is ready with its own bound, for a serve whose transport
// takes longer to come up than loopback.
func (s *server) readyWithin(limit time.Duration) {
	s.t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		out := s.stdout.String()
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			s.Line = out[:i]
			if err := json.Unmarshal([]byte(s.Line), &s.Banner); err != nil {
				s.t.Fatalf("ce serve's first line is not JSON: %v\n%s", err, s.Line)
			}
			return
		}
		select {
		case <-s.stdout.notify:
		case <-s.done:
			if strings.Contains(s.stdout.String(), "\n") {
				continue
			}
			s.t.Fatalf("ce serve exited (%v) before printing its JSON line; stderr:\n%s", s.state, s.stderr.String())
		case <-deadline.C:
			s.t.Fatalf("ce serve printed no JSON line within %v; stderr:\n%s", limit, s.stderr.String())
		}
	}
}

// servesOrExits waits until the child either prints its JSON line (true,
// Banner filled in) or exits without one (false).
func (s *server) servesOrExits() bool {
	s.t.Helper()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		if strings.Contains(s.stdout.String(), "\n") {
			s.ready()
			return true
		}
		select {
		case <-s.stdout.notify:
		case <-s.done:
			if strings.Contains(s.stdout.String(), "\n") {
				continue
			}
			return false
		case <-deadline.C:
			s.t.Fatalf("ce serve neither served nor exited within %v; stderr:\n%s", readyTimeout, s.stderr.String())
		}
	}
}

// wait waits for the child to exit and returns its exit code (-1 when a
// signal ended it).
func (s *server) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
		return s.state.ExitCode()
	case <-time.After(stopTimeout):
		s.t.Fatalf("ce serve (pid %d) did not exit within %v; stderr:\n%s", s.cmd.Process.Pid, stopTimeout, s.stderr.String())
		return -1
	}
}

// stop sends sig and waits for the exit; it returns the exit code.
func (s *server) stop(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signalling ce serve: %v", err)
	}
	return s.wait()
}

// kill9 ends the child with SIGKILL, as a crash would.
func (s *server) kill9() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatalf("SIGKILL: %v", err)
	}
	s.wait()
	if ws, ok := s.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		s.t.Fatalf("ce serve did not die of SIGKILL: %v", s.state)
	}
}

// result is what a one-shot `ce` command did.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func (r result) output() string { return r.stdout + r.stderr }

// ce runs one `ce ARGS...` in dir with extra environment and returns what it
// printed and its exit code. A command still running after runTimeout is
// killed and fails the test.
func ce(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	return ceWithin(t, runTimeout, dir, env, args...)
}

func ceWithin(t testing.TB, limit time.Duration, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ceBin, args...)
	cmd.Dir = dir
	cmd.Env = cetest.ChildEnv(env...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("ce %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", args, limit, r.stdout, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running ce %v: %v", args, err)
	}
	return r
}

// mustCE runs a command that must succeed.
func mustCE(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	r := ce(t, dir, env, args...)
	if r.code != 0 {
		t.Fatalf("ce %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// decodeJSON decodes a command's --json output into v.
func decodeJSON(t testing.TB, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
}

// requireKeys fails unless the JSON object has every key.
func requireKeys(t testing.TB, what string, obj map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			t.Errorf("%s: key %q missing in %v", what, k, sortedKeys(obj))
		}
	}
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// joinGrant is `ce join --json`.
type joinGrant struct {
	SessionToken  string   `json:"session_token"`
	SessionRef    string   `json:"session_ref"`
	ParticipantID string   `json:"participant_id"`
	WorkspaceID   string   `json:"workspace_id"`
	Capabilities  []string `json:"capabilities"`
	ExpiresAt     string   `json:"expires_at"`
}

var joinKeys = []string{"session_token", "session_ref", "participant_id", "workspace_id", "capabilities", "expires_at"}

// join runs `ce join URI --name NAME --json`, which must succeed.
func join(t testing.TB, dir, uri, name string) joinGrant {
	t.Helper()
	r := mustCE(t, dir, nil, "join", uri, "--name", name, "--json")
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "ce join --json", raw, joinKeys...)
	var g joinGrant
	decodeJSON(t, r, &g)
	if g.SessionToken == "" || g.ParticipantID == "" {
		t.Fatalf("ce join: empty token or participant: %s", r.stdout)
	}
	return g
}

// inviteGrant is `ce invite --json`.
type inviteGrant struct {
	InviteID     string   `json:"invite_id"`
	URI          string   `json:"uri"`
	Capabilities []string `json:"capabilities"`
	ExpiresAt    string   `json:"expires_at"`
	MaxUses      *int     `json:"max_uses"`
}

var inviteKeys = []string{"invite_id", "uri", "capabilities", "expires_at", "max_uses"}

// statusOut is `ce status --json`.
type statusOut struct {
	Status struct {
		WorkspaceID  string `json:"workspace_id"`
		Version      int64  `json:"version"`
		Name         string `json:"name"`
		Participants int    `json:"participants"`
	} `json:"status"`
	Listener struct {
		Serving bool `json:"serving"`
		PID     int  `json:"pid"`
	} `json:"listener"`
}

func status(t testing.TB, dir, file string) statusOut {
	t.Helper()
	var s statusOut
	decodeJSON(t, mustCE(t, dir, nil, "status", "--workspace", file, "--json"), &s)
	return s
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// httpDo sends one request (JSON body when body is not nil) and returns the
// status and body.
func httpDo(t testing.TB, method, url, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// wantHealthy checks GET {base}/healthz → 200 {"status":"ok"}.
func wantHealthy(t testing.TB, base string) {
	t.Helper()
	code, body := httpDo(t, "GET", base+"/healthz", "", nil)
	var v map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &v) != nil || v["status"] != "ok" || len(v) != 1 {
		t.Fatalf("GET %s/healthz = %d %s, want 200 {\"status\":\"ok\"}", base, code, body)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// waitFile polls until path exists (want true) or is gone (want false).
func waitFile(t testing.TB, path string, want bool) {
	t.Helper()
	deadline := time.Now().Add(fileTimeout)
	for exists(path) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: exists=%v after %v, want %v", path, !want, fileTimeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Paths beside a room's file.
func sidecarOf(file string) string { return file + ".commonroom.db" }
func ownerOf(file string) string   { return file + ".commonroom.owner" }
