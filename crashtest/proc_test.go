package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

const (
	readyTimeout = 30 * time.Second // for `ce serve` to print its JSON line
	stopTimeout  = 20 * time.Second // for a signalled `ce serve` to exit
)

// logBuffer is a goroutine-safe buffer that keeps the last max bytes and
// signals every write.
type logBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	max    int
	notify chan struct{} // capacity 1: "something was written"
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max, notify: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf.Write(p)
	if b.max > 0 && b.buf.Len() > 2*b.max {
		keep := bytes.Clone(b.buf.Bytes()[b.buf.Len()-b.max:])
		b.buf.Reset()
		b.buf.WriteString("…\n")
		b.buf.Write(keep)
	}
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

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

// server is one running `ce serve` child.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdout *logBuffer
	stderr *logBuffer
	done   chan struct{} // closed once the child has been waited for
	state  *os.ProcessState

	Banner banner
	Owner  ownerFile
}

// startServer starts `ce serve FILE --json --rate-limit 0 --max-sessions 256
// --max-sessions-per-invite 256` (its workload joins through one invitation)
// in dir, waits for its JSON line and reads its operator credential.
func startServer(t testing.TB, dir, file string) *server {
	t.Helper()
	s := &server{t: t, stdout: newLogBuffer(0), stderr: newLogBuffer(8 << 20), done: make(chan struct{})}
	args := []string{"serve", file, "--json", "--rate-limit", "0", "--max-sessions", "256", "--max-sessions-per-invite", "256"}
	s.cmd = exec.Command(ceBin, args...)
	s.cmd.Dir = dir
	s.cmd.Env = cetest.ChildEnv()
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
				t.Errorf("ce serve (pid %d) did not die after SIGKILL", s.cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("ce serve (pid %d) stderr (tail):\n%s", s.cmd.Process.Pid, s.stderr.String())
		}
	})
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

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ready waits (on the child's output, with a deadline) for the first line.
func (s *server) ready() {
	s.t.Helper()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		out := s.stdout.String()
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			if err := json.Unmarshal([]byte(out[:i]), &s.Banner); err != nil {
				s.t.Fatalf("ce serve's first line is not JSON: %v\n%s", err, out[:i])
			}
			if s.Banner.PID != s.cmd.Process.Pid || s.Banner.IngressURL == "" {
				s.t.Fatalf("ce serve's banner is wrong: %s", out[:i])
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
			s.t.Fatalf("ce serve printed no JSON line within %v; stderr:\n%s", readyTimeout, s.stderr.String())
		}
	}
}

// kill9 ends the child with SIGKILL, as a crash would, and waits for it.
func (s *server) kill9() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatalf("SIGKILL: %v", err)
	}
	s.wait()
	if ws, ok := s.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		s.t.Fatalf("ce serve did not die of SIGKILL: %v\nstderr:\n%s", s.state, s.stderr.String())
	}
}

// terminate sends SIGTERM (a graceful stop) and returns the exit code.
func (s *server) terminate() int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	return s.wait()
}

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
