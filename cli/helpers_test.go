package cli

// Helpers for the tests that run the real `ce` binary: TestMain builds it
// once, and each test starts its own `ce serve` in its own temporary
// directory. Every child is killed in t.Cleanup; nothing waits by sleeping —
// the tests wait on the process, on its JSON line, or (for files only) poll
// a condition with a deadline.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
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

// server is one running `ce serve` child (a cetest.Proc) and its banner.
type server struct {
	*cetest.Proc
	t      testing.TB
	dir    string
	cmd    *exec.Cmd
	stdout *cetest.Output
	stderr *cetest.Output
	done   <-chan struct{} // closed once the child has been waited for

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
	p := cetest.Spawn(t, ceBin, dir, env, 0, stopTimeout, args...)
	return &server{Proc: p, t: t, dir: dir, cmd: p.Cmd, stdout: p.Stdout, stderr: p.Stderr, done: p.Done()}
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
	line, err := s.FirstLine(limit)
	if err != nil {
		s.t.Fatal(err)
	}
	s.Line = line
	if err := json.Unmarshal([]byte(s.Line), &s.Banner); err != nil {
		s.t.Fatalf("ce serve's first line is not JSON: %v\n%s", err, s.Line)
	}
}

// servesOrExits waits until the child either prints its JSON line (true,
// Banner filled in) or exits without one (false).
func (s *server) servesOrExits() bool {
	s.t.Helper()
	_, err := s.FirstLine(readyTimeout)
	if errors.Is(err, cetest.ErrNoLine) {
		return false
	}
	if err != nil {
		s.t.Fatalf("ce serve neither served nor exited: %v", err)
	}
	s.ready()
	return true
}

// wait waits for the child to exit and returns its exit code (-1 when a
// signal ended it).
func (s *server) wait() int {
	s.t.Helper()
	code, err := s.Wait(stopTimeout)
	if err != nil {
		s.t.Fatal(err)
	}
	return code
}

// stop sends sig and waits for the exit; it returns the exit code.
func (s *server) stop(sig os.Signal) int {
	s.t.Helper()
	code, err := s.Stop(sig, stopTimeout)
	if err != nil {
		s.t.Fatal(err)
	}
	return code
}

// kill9 ends the child with SIGKILL, as a crash would.
func (s *server) kill9() {
	s.t.Helper()
	if err := s.Kill9(stopTimeout); err != nil {
		s.t.Fatal(err)
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
	return ceStdin(t, limit, dir, env, nil, args...)
}

// ceStdin is ceWithin with stdin (nil: empty).
func ceStdin(t testing.TB, limit time.Duration, dir string, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ran, err := cetest.Run(ctx, ceBin, dir, env, stdin, args...)
	r := result{stdout: ran.Stdout, stderr: ran.Stderr, code: ran.Code, elapsed: ran.Elapsed}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ce %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", args, limit, r.stdout, r.stderr)
	case err != nil:
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
	r, err := mcptest.Do(context.Background(), httpClient, method, url, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r.Status, r.Raw
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
