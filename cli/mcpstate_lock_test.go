package cli

// Two `ce mcp` started at once on one fresh state file (issue 25 item 4),
// with the real binary: both used to join — two participants, one of them
// orphaned, or with a one-use invitation the second failing. The state file
// is now locked for the step that joins and saves, so the second waits and
// then reuses the first's session.

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// gatedProxy forwards TCP connections to target, each only once open is
// closed; arrived receives one value per accepted connection. It is the
// way in a rewritten invitation names, so the test decides when a join
// reaches the room.
type gatedProxy struct {
	ln      net.Listener
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGatedProxy(t *testing.T, target string) *gatedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProxy{ln: ln, arrived: make(chan struct{}, 64), open: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.release()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.arrived <- struct{}{}
			wg.Go(func() {
				defer c.Close()
				<-p.open
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				io.Copy(c, up)
				c.(*net.TCPConn).CloseWrite()
				<-done
			})
		}
	})
	return p
}

func (p *gatedProxy) release() { p.once.Do(func() { close(p.open) }) }

// port is the proxy's port.
func (p *gatedProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// TestMCPTwoBridgesOnOneFreshStateFile: two ce mcp started together on one
// fresh state file with a one-use invitation. The first join is held at a
// proxy until the other bridge has either reached the room too (the race
// of main: both joined) or said it waits for the state file's lock; then
// both must answer tools/list and the room must have exactly one more
// participant.
func TestMCPTwoBridgesOnOneFreshStateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json")
	participants := func() int {
		var ps []map[string]any
		decodeJSON(t, mustCE(t, dir, nil, "participants", "--workspace", file, "--json"), &ps)
		return len(ps)
	}
	before := participants()

	// The one-use invitation, its loopback hint pointed at the proxy.
	inv, err := room.DecodeInvitation(inviteOnce(t, dir, file), room.Defaults().MaxInvitePayload)
	if err != nil {
		t.Fatal(err)
	}
	ingress := strings.TrimPrefix(s.Banner.IngressURL, "http://")
	proxy := newGatedProxy(t, ingress)
	for i, h := range inv.Transports {
		if h.Type == "loopback" {
			inv.Transports[i].Port = proxy.port()
		}
	}
	if inv.Transport.Type == "loopback" {
		inv.Transport.Port = proxy.port()
	}
	uri := room.EncodeInvitation(inv)

	state := filepath.Join(t.TempDir(), "sessions", "room.json")
	bs := []*bridgeProc{startBridge(t, dir, uri, state, nil), startBridge(t, dir, uri, state, nil)}

	// Hold the first join until the other bridge shows where it is.
	const waiting = "another ce mcp is joining with this state file"
	deadline := time.After(bridgeTimeout)
	arrived := 0
	for released := false; !released; {
		for _, b := range bs {
			if strings.Contains(b.Stderr.String(), waiting) {
				released = true
			}
		}
		if arrived >= 2 {
			released = true // both reached the room: there was no lock
		}
		if released {
			break
		}
		select {
		case <-proxy.arrived:
			arrived++
		case <-bs[0].Stderr.Notify():
		case <-bs[1].Stderr.Notify():
		case <-bs[0].Done():
			t.Fatalf("a ce mcp exited before joining; stderr:\n%s", bs[0].Stderr.String())
		case <-bs[1].Done():
			t.Fatalf("a ce mcp exited before joining; stderr:\n%s", bs[1].Stderr.String())
		case <-deadline:
			t.Fatalf("neither bridge joined nor waited within %v", bridgeTimeout)
		}
	}
	proxy.release()

	for i, b := range bs {
		b.call(1, "tools/list", nil)
		if !strings.Contains(b.Stderr.String(), "joined the room") && !strings.Contains(b.Stderr.String(), "reusing the stored session") {
			t.Errorf("bridge %d neither joined nor reused:\n%s", i, b.Stderr.String())
		}
	}
	joined := 0
	for _, b := range bs {
		if strings.Contains(b.Stderr.String(), "joined the room") {
			joined++
		}
	}
	if joined != 1 {
		t.Errorf("%d bridges joined, want exactly one (the other reuses its session)", joined)
	}
	if got := participants(); got != before+1 {
		t.Errorf("participants %d → %d, want exactly one more", before, got)
	}
	st := readState(t, state)
	if st.ParticipantID == "" || st.SessionToken == "" {
		t.Errorf("state file %+v", st)
	}
	for _, b := range bs {
		if code := b.closeAndWait(); code != 0 {
			t.Errorf("exit %d", code)
		}
	}
}

// TestMCPStateLockWaitIsBounded: a ce mcp that finds the state file's lock
// held waits at most --transport-timeout, then exits busy saying who holds
// it and what to do, without joining (the invitation stays unspent); once
// the lock is free the same command joins.
func TestMCPStateLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	startServe(t, dir, "serve", "idea.md", "--json")
	uri := inviteOnce(t, dir, file)
	state := filepath.Join(t.TempDir(), "room.json")
	lock, err := os.OpenFile(state+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	r := ce(t, dir, nil, "mcp", uri, "--state", state, "--transport-timeout", "300ms")
	if r.code != exitBusy {
		t.Fatalf("exit %d, want %d (busy)\n%s", r.code, exitBusy, r.output())
	}
	for _, want := range []string{"room_busy", state + ".lock", "gave up waiting", "its own --state"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if exists(state) {
		t.Error("a state file was written while another held the lock")
	}
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	b := startBridge(t, dir, uri, state, nil)
	b.call(1, "tools/list", nil) // the invitation was not spent: it joins now
	if code := b.closeAndWait(); code != 0 {
		t.Errorf("exit %d", code)
	}
}
