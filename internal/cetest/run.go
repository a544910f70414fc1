package cetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// Ran is what a finished one-shot child left: what it printed and how it
// exited.
type Ran struct {
	Stdout, Stderr string
	Code           int
	Elapsed        time.Duration
}

// Run runs bin args to completion in dir with ChildEnv(env...) and stdin
// (nil: empty), the way every one-shot `ce` command in a test is run, so
// the environment rules and the reaping live in one place. The child is
// killed when ctx ends; Run then returns ctx's error with what it printed.
func Run(ctx context.Context, bin, dir string, env []string, stdin io.Reader, args ...string) (Ran, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = ChildEnv(env...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, stdin
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := Ran{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		return r, fmt.Errorf("running %s %v: %w", bin, args, err)
	}
	return r, nil
}
