package cetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own child: PROCTEST_MODE says what the child does.
func TestMain(m *testing.M) {
	switch os.Getenv("PROCTEST_MODE") {
	case "serve": // print a line, then wait to be signalled
		fmt.Println(`{"ready":true}`)
		fmt.Fprintln(os.Stderr, "serving")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "echo": // copy stdin to stdout, name the directory on stderr, exit 4
		io.Copy(os.Stdout, os.Stdin)
		wd, _ := os.Getwd()
		fmt.Fprint(os.Stderr, wd, " ", os.Getenv("CE_LEAK"))
		os.Exit(4)
	case "fail": // exit without a line
		fmt.Fprintln(os.Stderr, "cannot open the file")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestProcFirstLineSignalsAndExit(t *testing.T) {
	p := Spawn(t, os.Args[0], t.TempDir(), []string{"PROCTEST_MODE=serve"}, 0, 10*time.Second, "-test.run=none")
	line, err := p.FirstLine(10 * time.Second)
	if err != nil || line != `{"ready":true}` {
		t.Fatalf("FirstLine = %q, %v", line, err)
	}
	if p.Exited() || p.State() != nil {
		t.Fatal("the child counts as exited while it runs")
	}
	if err := p.Kill9(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() || p.State() == nil || p.Err() == nil {
		t.Fatalf("after SIGKILL: exited %v, state %v, err %v", p.Exited(), p.State(), p.Err())
	}

	// A SIGTERM that the child does not outlive.
	p = Spawn(t, os.Args[0], t.TempDir(), []string{"PROCTEST_MODE=serve"}, 0, 10*time.Second, "-test.run=none")
	if _, err := p.FirstLine(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil || code != -1 {
		t.Fatalf("Stop(SIGTERM) = %d, %v; want -1 (ended by a signal)", code, err)
	}
}

func TestProcThatExitsWithoutALine(t *testing.T) {
	p := Spawn(t, os.Args[0], t.TempDir(), []string{"PROCTEST_MODE=fail"}, 0, 10*time.Second, "-test.run=none")
	_, err := p.FirstLine(10 * time.Second)
	if !errors.Is(err, ErrNoLine) || !strings.Contains(err.Error(), "cannot open the file") {
		t.Fatalf("FirstLine err = %v, want ErrNoLine with the child's stderr", err)
	}
	if code, err := p.Wait(10 * time.Second); err != nil || code != 3 {
		t.Fatalf("Wait = %d, %v; want exit 3", code, err)
	}
	// Kill9 on a child that exited on its own says so.
	if err := p.Kill9(time.Second); err == nil {
		t.Fatal("Kill9 of an exited child reported success")
	}
}

func TestOutputKeepsTheTail(t *testing.T) {
	o := NewOutput(10)
	o.Write([]byte(strings.Repeat("a", 15)))
	o.Write([]byte("0123456789"))
	if got := o.String(); got != "…\n0123456789" {
		t.Fatalf("Output = %q, want the last 10 bytes after a marker", got)
	}
	select {
	case <-o.Notify():
	default:
		t.Fatal("a write did not notify")
	}
}

func TestRunReportsOutputCodeAndEnvironment(t *testing.T) {
	t.Setenv("CE_LEAK", "from-the-parent")
	dir := t.TempDir()
	r, err := Run(context.Background(), os.Args[0], dir, []string{"PROCTEST_MODE=echo"}, strings.NewReader("hello"), "-test.run=none")
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "hello" || r.Code != 4 {
		t.Fatalf("Run = stdout %q, code %d; want the stdin echoed and exit 4", r.Stdout, r.Code)
	}
	wd, _ := filepath.EvalSymlinks(dir)
	if got := strings.TrimSpace(r.Stderr); got != wd && got != dir {
		t.Fatalf("child ran in %q with CE_LEAK visible or in the wrong directory; want %q and no CE_* variable", got, dir)
	}

	// A child that outlives its context is killed and the error says so.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, os.Args[0], dir, []string{"PROCTEST_MODE=serve"}, nil, "-test.run=none"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run past its deadline = %v, want context.DeadlineExceeded", err)
	}
	// A binary that does not exist is an error, not an exit code.
	if _, err := Run(context.Background(), filepath.Join(dir, "missing"), dir, nil, nil); err == nil {
		t.Fatal("Run of a missing binary reported no error")
	}
}
