package crashtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

const (
	readyTimeout = 30 * time.Second // for `ce serve` to print its JSON line
	stopTimeout  = 20 * time.Second // for a signalled `ce serve` to exit
)

// banner is the one JSON line `ce serve --json` prints when ready.
type banner struct {
	WorkspaceID string `json:"workspace_id"`
	OwnerURL    string `json:"owner_url"`
	IngressURL  string `json:"ingress_url"`
	MCPURL      string `json:"mcp_url"`
	Invite      string `json:"invite"`
	PID         int    `json:"pid"`
}

// ownerFile is the operator credential a serving room writes beside the file.
type ownerFile struct {
	PID           int    `json:"pid"`
	WorkspaceID   string `json:"workspace_id"`
	OwnerURL      string `json:"owner_url"`
	IngressURL    string `json:"ingress_url"`
	OperatorToken string `json:"operator_token"`
}

// server is one running `ce serve` child (a cetest.Proc).
type server struct {
	*cetest.Proc
	t   testing.TB
	cmd *exec.Cmd

	Banner banner
	Owner  ownerFile
}

// startServer starts `ce serve FILE --json --rate-limit 0 --max-sessions 256
// --max-sessions-per-invite 256` (its workload joins through one invitation)
// in dir, waits for its JSON line and reads its operator credential.
func startServer(t testing.TB, dir, file string) *server {
	t.Helper()
	args := []string{"serve", file, "--json", "--rate-limit", "0", "--max-sessions", "256", "--max-sessions-per-invite", "256"}
	p := cetest.Spawn(t, ceBin, dir, nil, 8<<20, stopTimeout, args...)
	s := &server{Proc: p, t: t, cmd: p.Cmd}
	s.ready()
	of, err := readOwnerFile(file + ".commonroom.owner")
	if err != nil {
		t.Fatalf("ce serve is ready but its operator credential cannot be read: %v", err)
	}
	if of.PID != s.cmd.Process.Pid {
		t.Fatalf("operator credential names pid %d, the server is pid %d (a stale credential was trusted)", of.PID, s.cmd.Process.Pid)
	}
	s.Owner = of
	return s
}

func readOwnerFile(path string) (ownerFile, error) {
	var of ownerFile
	b, err := os.ReadFile(path)
	if err != nil {
		return of, err
	}
	if err := json.Unmarshal(b, &of); err != nil {
		return of, err
	}
	if of.OwnerURL == "" || of.OperatorToken == "" || of.IngressURL == "" {
		return of, fmt.Errorf("incomplete credential %s", b)
	}
	return of, nil
}

// ready waits (on the child's output, with a deadline) for the first line.
func (s *server) ready() {
	s.t.Helper()
	line, err := s.FirstLine(readyTimeout)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(line), &s.Banner); err != nil {
		s.t.Fatalf("ce serve's first line is not JSON: %v\n%s", err, line)
	}
	if s.Banner.PID != s.cmd.Process.Pid || s.Banner.IngressURL == "" {
		s.t.Fatalf("ce serve's banner is wrong: %s", line)
	}
}

// kill9 ends the child with SIGKILL, as a crash would, and waits for it.
func (s *server) kill9() {
	s.t.Helper()
	if err := s.Kill9(stopTimeout); err != nil {
		s.t.Fatal(err)
	}
}

// terminate sends SIGTERM (a graceful stop) and returns the exit code.
func (s *server) terminate() int {
	s.t.Helper()
	code, err := s.Stop(syscall.SIGTERM, stopTimeout)
	if err != nil {
		s.t.Fatal(err)
	}
	return code
}
