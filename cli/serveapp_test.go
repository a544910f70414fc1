package cli

// serveApp's one Close, checked in this process (so a goroutine left behind
// shows): after an Open that fails late and after a listener that dies
// while serving, the lock is free, the ports are free, no credential file
// is left, no goroutine of ours runs, and a real ce serve of the same file
// starts afterwards.

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/room"
)

// newTestServeApp is a serveApp for file with ce serve's default flags
// and args parsed over them, as runServe would make it.
func newTestServeApp(t *testing.T, file string, args ...string) *serveApp {
	t.Helper()
	env := Env{Stdout: cetest.NewOutput(0), Stderr: cetest.NewOutput(0), Getenv: func(string) string { return "" },
		Signals: make(chan os.Signal, 1), Exit: func(int) { t.Error("serveApp called Exit") }}
	fs, f, ts := newServeFlagSet(env)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	prov, log, err := checkServeFlags(env, *f, ts)
	if err != nil {
		t.Fatal(err)
	}
	return &serveApp{env: env, f: *f, file: file, prov: prov, log: log}
}

// ourGoroutines are the stacks of the goroutines the room's code runs
// (ours, net/http's and database/sql's), the tests' own left out.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.tRunner(") {
			continue
		}
		for _, m := range []string{"github.com/commonroom/ce/", "net/http.", "database/sql."} {
			if strings.Contains(g, m) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// wantNoNewGoroutines waits for the room's goroutines to come down to the
// count before (streams and timers may take a moment to unwind).
func wantNoNewGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := ourGoroutines()
		if len(left) <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines before, %d after Close:\n%s", before, len(left), strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr is a loopback address nothing listens on (a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// wantReleased checks what every Close must leave: the writer lock free,
// no credential file, the listeners' addresses free again.
func wantReleased(t *testing.T, file string, addrs ...string) {
	t.Helper()
	lock, err := room.AcquireWriterLock(file)
	if err != nil {
		t.Errorf("the writer lock is still held: %v", err)
	} else {
		lock.Release()
	}
	if exists(ownerOf(file)) {
		t.Error("the credential file was left behind")
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is still bound: %v", a, err)
			continue
		}
		ln.Close()
	}
}

// wantServesAgain: a real ce serve of file starts and stops cleanly.
func wantServesAgain(t *testing.T, dir, file string) {
	t.Helper()
	s := startServe(t, dir, "serve", filepath.Base(file), "--json")
	if s.Banner.Invite == "" {
		t.Error("the second serve printed no invitation")
	}
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Errorf("the second serve exited %d", code)
	}
}

// TestServeAppOpenFailsLate: an Open that fails after it took the lock and
// the owner listener (the ingress address is taken) gives everything back
// and leaves the document and its sidecar as they were; one that fails
// after the sidecar, the actor and the hub are up (the credential cannot be
// written) gives everything back too.
func TestServeAppOpenFailsLate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(file, []byte("# Idea\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantServesAgain(t, dir, file) // a sidecar to leave untouched

	t.Run("the ingress address is taken", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		before, files := len(ourGoroutines()), roomFiles(t, file)
		owner := freeAddr(t)
		app := newTestServeApp(t, file, "--addr", owner, "--ingress-addr", taken.Addr().String())
		err = app.Open(context.Background())
		if err == nil || !strings.Contains(err.Error(), "cannot listen on "+taken.Addr().String()) {
			t.Fatalf("Open: %v, want the taken address named", err)
		}
		wantReleased(t, file, owner)
		wantNoNewGoroutines(t, before)
		wantSameFiles(t, file, files)
		if err := app.Close(); err != nil {
			t.Errorf("a second Close: %v", err)
		}
		wantServesAgain(t, dir, file)
	})

	t.Run("the credential cannot be written", func(t *testing.T) {
		// A directory that is not empty where the credential goes: the stale
		// credential's removal and the rename onto it both fail.
		if err := os.MkdirAll(filepath.Join(ownerOf(file), "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		before, doc := len(ourGoroutines()), roomFiles(t, file)["idea.md"]
		owner, ingress := freeAddr(t), freeAddr(t)
		app := newTestServeApp(t, file, "--addr", owner, "--ingress-addr", ingress)
		err := app.Open(context.Background())
		if err == nil || !strings.Contains(err.Error(), "cannot write the operator credential") {
			t.Fatalf("Open: %v, want the credential named", err)
		}
		if app.local == nil {
			t.Fatal("Open failed before it opened the room; this case tests a later failure")
		}
		if err := os.RemoveAll(ownerOf(file)); err != nil {
			t.Fatal(err)
		}
		wantReleased(t, file, owner, ingress)
		wantNoNewGoroutines(t, before)
		if got := roomFiles(t, file)["idea.md"]; got != doc {
			t.Errorf("the document changed: %q", got)
		}
		wantServesAgain(t, dir, file)
	})
}

// TestServeAppListenerDies: a listener that fails while serving ends the
// app (Done closes) and Close — in full, once, however often called —
// reports it.
func TestServeAppListenerDies(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(file, []byte("# Idea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := len(ourGoroutines())
	owner, ingress := freeAddr(t), freeAddr(t)
	app := newTestServeApp(t, file, "--addr", owner, "--ingress-addr", ingress)
	if err := app.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !exists(ownerOf(file)) {
		t.Fatal("no credential file while serving")
	}
	select {
	case <-app.Done():
		t.Fatal("Done before anything failed")
	default:
	}
	app.ingressLn.Close() // under the server's feet: its Serve fails
	select {
	case <-app.Done():
	case <-time.After(readyTimeout):
		t.Fatal("a dead listener did not end the app")
	}
	err := app.Close()
	if err == nil || !strings.Contains(err.Error(), "a listener failed") || room.AsError(err).Kind != room.KindInternal {
		t.Fatalf("Close: %v, want a failed listener", err)
	}
	if again := app.Close(); again != err {
		t.Errorf("a second Close returned %v, want %v", again, err)
	}
	wantReleased(t, file, owner, ingress)
	wantNoNewGoroutines(t, before)
	wantServesAgain(t, dir, file)
}
