package cetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// Write keeps p (trimming to the tail when bounded) and wakes a waiter.
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

// Proc is one running child: the cli and crash tests start `ce serve` (and
// a few other long-running commands), the bench its rooms and its bare SSE
// server, this one way; they wait for its first line, signal it and reap it.
type Proc struct {
	Cmd    *exec.Cmd
	Args   []string
	Stdout *Output
	Stderr *Output        // nil when Options.Stderr took it
	Stdin  io.WriteCloser // nil unless Options.Stdin

	name    string // "ce serve", "litestream replicate": for messages
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
}

// ErrNoLine is FirstLine's error when the child exited without printing a line.
var ErrNoLine = errors.New("exited before printing a line")

// Options are the ways a start differs from a test's plain one.
type Options struct {
	Dir       string
	Env       []string // added to the environment
	StderrMax int      // Proc.Stderr keeps about the last StderrMax bytes (0: all)
	// Stderr, when set, receives the child's stderr (a log file) instead
	// of Proc.Stderr.
	Stderr io.Writer
	// InheritEnv passes the caller's whole environment on, CE_* included
	// (the bench: whoever runs it may tune its rooms); otherwise ChildEnv.
	InheritEnv bool
	// Stdin gives the child a stdin pipe (Proc.Stdin); closing it ends a
	// child that waits on it.
	Stdin bool
	// DieWithParent has the kernel SIGKILL the child when this process
	// dies (Linux), so an interrupted run leaves nothing behind.
	DieWithParent bool
}

// Start runs bin args in dir with ChildEnv(env...); stderr keeps about
// the last stderrMax bytes (0: all). Reap it with Wait, Stop or Kill9.
func Start(bin, dir string, env []string, stderrMax int, args ...string) (*Proc, error) {
	return StartWith(bin, Options{Dir: dir, Env: env, StderrMax: stderrMax}, args...)
}

// StartWith is Start with every option.
func StartWith(bin string, o Options, args ...string) (*Proc, error) {
	p := &Proc{Args: args, Stdout: NewOutput(0), done: make(chan struct{})}
	p.name = filepath.Base(bin)
	if len(args) > 0 {
		p.name += " " + args[0]
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Dir = o.Dir
	if o.InheritEnv {
		p.Cmd.Env = append(os.Environ(), o.Env...)
	} else {
		p.Cmd.Env = ChildEnv(o.Env...)
	}
	p.Cmd.Stdout = p.Stdout
	if o.Stderr != nil {
		p.Cmd.Stderr = o.Stderr
	} else {
		p.Stderr = NewOutput(o.StderrMax)
		p.Cmd.Stderr = p.Stderr
	}
	if o.DieWithParent {
		dieWithParent(p.Cmd)
	}
	if o.Stdin {
		in, err := p.Cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		p.Stdin = in
	}
	p.Cmd.WaitDelay = 5 * time.Second
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %v: %w", bin, args, err)
	}
	go func() {
		p.waitErr = p.Cmd.Wait()
		p.state = p.Cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// stderr is what the child wrote to stderr, for messages ("" when it went
// elsewhere).
func (p *Proc) stderr() string {
	if p.Stderr == nil {
		return ""
	}
	return p.Stderr.String()
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
			t.Logf("%s %v (pid %d) stdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, p.Pid(), p.Stdout.String(), p.stderr())
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
	return p.FirstLineCtx(context.Background(), limit)
}

// FirstLineCtx is FirstLine that also gives up when ctx ends.
func (p *Proc) FirstLineCtx(ctx context.Context, limit time.Duration) (string, error) {
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
			return "", fmt.Errorf("%s (%v) %w; stderr:\n%s", p.name, p.state, ErrNoLine, p.stderr())
		case <-deadline.C:
			return "", fmt.Errorf("%s printed no line within %v; stderr:\n%s", p.name, limit, p.stderr())
		case <-ctx.Done():
			return "", ctx.Err()
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
		return -1, fmt.Errorf("%s (pid %d) did not exit within %v; stderr:\n%s", p.name, p.Pid(), limit, p.stderr())
	}
}

// Err is the child's exit as exec reports it (nil for exit 0); valid once
// Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.waitErr
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
		return fmt.Errorf("%s did not die of SIGKILL: %v\nstderr:\n%s", p.name, p.state, p.stderr())
	}
	return nil
}
