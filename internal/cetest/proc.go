package cetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Output is a child's stdout or stderr: goroutine-safe, signalling every
// write, and keeping only the last max bytes when max > 0 (a crash test's
// server logs for minutes).
type Output struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	max    int
	notify chan struct{} // capacity 1: "something was written"
}

// NewOutput keeps everything (max 0) or about the last max bytes.
func NewOutput(max int) *Output { return &Output{max: max, notify: make(chan struct{}, 1)} }

func (b *Output) Write(p []byte) (int, error) {
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

// String is everything kept so far.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Notify receives after a write, so a waiter need not poll.
func (b *Output) Notify() <-chan struct{} { return b.notify }

// Proc is one running ce child: the cli and crash tests start `ce serve`
// (and a few other long-running commands) this one way, wait for its
// first line, signal it and reap it.
type Proc struct {
	Cmd    *exec.Cmd
	Args   []string
	Stdout *Output
	Stderr *Output

	name  string        // "ce serve", "litestream replicate": for messages
	done  chan struct{} // closed once the child has been waited for
	state *os.ProcessState
}

// ErrNoLine is FirstLine's error when the child exited without printing a line.
var ErrNoLine = errors.New("exited before printing a line")

// Start runs bin args in dir with ChildEnv(env...); stderr keeps about
// the last stderrMax bytes (0: all). Reap it with Wait, Stop or Kill9.
func Start(bin, dir string, env []string, stderrMax int, args ...string) (*Proc, error) {
	p := &Proc{Args: args, Stdout: NewOutput(0), Stderr: NewOutput(stderrMax), done: make(chan struct{})}
	p.name = filepath.Base(bin)
	if len(args) > 0 {
		p.name += " " + args[0]
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Dir = dir
	p.Cmd.Env = ChildEnv(env...)
	p.Cmd.Stdout = p.Stdout
	p.Cmd.Stderr = p.Stderr
	p.Cmd.WaitDelay = 5 * time.Second
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %v: %w", bin, args, err)
	}
	go func() {
		p.Cmd.Wait()
		p.state = p.Cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// Spawn is Start for a test: a failure to start fails t, and t.Cleanup
// kills a child still running (waiting up to stopTimeout for it) and, when
// the test failed, logs what it printed.
func Spawn(t testing.TB, bin, dir string, env []string, stderrMax int, stopTimeout time.Duration, args ...string) *Proc {
	t.Helper()
	p, err := Start(bin, dir, env, stderrMax, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.Exited() {
			p.Cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(stopTimeout):
				t.Errorf("%s (pid %d) did not die after SIGKILL", p.name, p.Pid())
			}
		}
		if t.Failed() {
			t.Logf("%s %v (pid %d) stdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, p.Pid(), p.Stdout.String(), p.Stderr.String())
		}
	})
	return p
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is how the child exited; nil while it runs.
func (p *Proc) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.state
}

// FirstLine waits, on the child's output and no longer than limit, for the
// first line on stdout. A child that exits without one gives ErrNoLine
// (wrapped with its stderr).
func (p *Proc) FirstLine(limit time.Duration) (string, error) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		out := p.Stdout.String()
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			return out[:i], nil
		}
		select {
		case <-p.Stdout.Notify():
		case <-p.done:
			if strings.Contains(p.Stdout.String(), "\n") {
				continue
			}
			return "", fmt.Errorf("%s (%v) %w; stderr:\n%s", p.name, p.state, ErrNoLine, p.Stderr.String())
		case <-deadline.C:
			return "", fmt.Errorf("%s printed no line within %v; stderr:\n%s", p.name, limit, p.Stderr.String())
		}
	}
}

// Wait waits up to limit for the child to exit and returns its exit code
// (-1 when a signal ended it).
func (p *Proc) Wait(limit time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.state.ExitCode(), nil
	case <-time.After(limit):
		return -1, fmt.Errorf("%s (pid %d) did not exit within %v; stderr:\n%s", p.name, p.Pid(), limit, p.Stderr.String())
	}
}

// Stop sends sig and waits up to limit for the exit.
func (p *Proc) Stop(sig os.Signal, limit time.Duration) (int, error) {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return -1, fmt.Errorf("signalling %s: %w", p.name, err)
	}
	return p.Wait(limit)
}

// Kill9 ends the child with SIGKILL, as a crash would, waits for it and
// checks that SIGKILL is what ended it.
func (p *Proc) Kill9(limit time.Duration) error {
	if _, err := p.Stop(syscall.SIGKILL, limit); err != nil {
		return err
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("%s did not die of SIGKILL: %v\nstderr:\n%s", p.name, p.state, p.Stderr.String())
	}
	return nil
}
