package cli

// What ce serve and ce join promise every transport plugin, checked
// in-process with a plugin written for the test (the real exec plugin runs
// through the binary in transport_test.go): its own flags, the options it
// opens with, the address it is given (the ingress, never the owner
// listener), the bounded wait for a plugin that ignores its context, the
// notice reaching the terminal, and Close on every path.

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// stubProvider is the transport "stub": Expose either never returns (it
// ignores its context; only Close ends it) or exposes the ingress as
// room.stub.invalid, dialled by connecting to params.ingress.
type stubProvider struct {
	region *string // this provider's own flag
	*stubShared
}

// stubShared is what every fresh stub provider reports to the test.
type stubShared struct {
	opened  chan transport.Options
	regions chan string // the --stub-region each Open saw
	plug    *stubPlugin
}

func (p *stubProvider) Name() string { return "stub" }
func (p *stubProvider) AddFlags(fs *flag.FlagSet) {
	p.region = fs.String("stub-region", "", "where the stub lives")
}
func (p *stubProvider) Open(_ context.Context, opts transport.Options) (transport.Plugin, error) {
	p.regions <- *p.region
	p.opened <- opts
	return p.plug, nil
}

type stubPlugin struct {
	stuck   bool
	exposed chan string // the address Expose was given
	closed  chan struct{}
	once    sync.Once
	closes  int
	mu      sync.Mutex
}

func (s *stubPlugin) Name() string { return "stub" }
func (s *stubPlugin) Expose(_ context.Context, addr string) (transport.Hint, error) {
	s.exposed <- addr
	if s.stuck {
		<-s.closed // deaf to its context, as a broken plugin would be
		return transport.Hint{}, context.Canceled
	}
	return transport.Hint{Type: "stub", Address: "room.stub.invalid", Port: 4443, Mode: "private", Encrypted: true,
		Params: map[string]string{"ingress": addr}}, nil
}
func (s *stubPlugin) Dial(ctx context.Context, h transport.Hint) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", h.Params["ingress"])
}
func (s *stubPlugin) Close() error {
	s.mu.Lock()
	s.closes++
	s.mu.Unlock()
	s.once.Do(func() { close(s.closed) })
	return nil
}

func newStub(stuck bool) (*transport.Registry, *stubShared) {
	sh := &stubShared{opened: make(chan transport.Options, 4), regions: make(chan string, 4),
		plug: &stubPlugin{stuck: stuck, exposed: make(chan string, 4), closed: make(chan struct{})}}
	reg := transport.NewRegistry()
	reg.Register("stub", func() transport.Provider { return &stubProvider{stubShared: sh} })
	return reg, sh
}

// inProcess runs cli.Main in a goroutine with reg; the returned channel
// yields its exit code.
func inProcess(t *testing.T, dir string, reg *transport.Registry, sig chan os.Signal, extraEnv map[string]string, args ...string) (stdout, stderr *cetest.Output, code chan int) {
	t.Helper()
	stdout, stderr, code = cetest.NewOutput(0), cetest.NewOutput(0), make(chan int, 1)
	getenv := func(k string) string {
		if v, ok := extraEnv[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "CE_") {
			return ""
		}
		return os.Getenv(k)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
	go func() {
		code <- Main(context.Background(), args, Env{Stdout: stdout, Stderr: stderr, Getenv: getenv, Signals: sig,
			Exit: func(int) {}, Transports: reg})
	}()
	return stdout, stderr, code
}

func waitCode(t *testing.T, code chan int, stderr *cetest.Output) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(readyTimeout):
		t.Fatalf("ce did not return within %v; stderr:\n%s", readyTimeout, stderr.String())
		return -1
	}
}

// TestServeTransportStuck: a plugin that asks the person to log in and then
// never becomes ready (deaf to its context) makes serve exit
// transport_unavailable once --transport-timeout passes, with the notice
// shown, the plugin closed, its own flag and state directory given, and no
// sidecar made.
func TestServeTransportStuck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "idea.md")
	os.WriteFile(file, []byte("# Idea\n"), 0o644)
	reg, p := newStub(true)
	go func() {
		opts := <-p.opened
		p.opened <- opts // keep it for the assertions below
		opts.Notice("open https://login.stub.invalid/a/1234 to let this room in")
	}()
	_, stderr, code := inProcess(t, dir, reg, make(chan os.Signal, 1), nil,
		"serve", "idea.md", "--json", "--transport", "stub", "--transport-timeout", "300ms", "--stub-region", "eu-1")
	if c := waitCode(t, code, stderr); c != exitBusy {
		t.Fatalf("exit %d, want %d\n%s", c, exitBusy, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"Transport stub: open https://login.stub.invalid/a/1234 to let this room in",
		"transport_unavailable: transport stub could not expose the room", "not up within --transport-timeout (300ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	opts := <-p.opened
	if want := file + ".commonroom.transport/stub"; opts.StateDir != want || opts.Joining || opts.Logger == nil || opts.Getenv == nil {
		t.Errorf("options %+v, want state dir %s", opts, want)
	}
	if st, err := os.Stat(opts.StateDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v", st, err)
	}
	if r := <-p.regions; r != "eu-1" {
		t.Errorf("the provider's own flag reached it as %q", r)
	}
	select {
	case <-p.plug.closed:
	default:
		t.Error("the plugin was not closed")
	}
	if exists(sidecarOf(file)) || exists(ownerOf(file)) {
		t.Error("a failed transport left a sidecar or an operator file")
	}
}

// TestServeTransportExposesTheIngressOnly: the plugin is given the ingress
// listener's address (never the owner's), its hint goes first in the
// invitation, ce join opens its own plugin with Joining and a state
// directory under the user's configuration, the room labels that session
// with the plugin's name, and serve closes the plugin on shutdown.
func TestServeTransportExposesTheIngressOnly(t *testing.T) {
	dir, cfg := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Idea\n"), 0o644)
	reg, p := newStub(false)
	sig := make(chan os.Signal, 1)
	stdout, stderr, code := inProcess(t, dir, reg, sig, nil, "serve", "idea.md", "--json", "--transport", "stub")
	deadline := time.After(readyTimeout)
	for !strings.Contains(stdout.String(), "\n") {
		select {
		case <-stdout.Notify():
		case c := <-code:
			t.Fatalf("serve exited %d\n%s", c, stderr.String())
		case <-deadline:
			t.Fatalf("no banner\n%s", stderr.String())
		}
	}
	var b banner
	if err := json.Unmarshal([]byte(strings.SplitN(stdout.String(), "\n", 2)[0]), &b); err != nil {
		t.Fatal(err)
	}
	addr := <-p.plug.exposed
	if "http://"+addr != b.IngressURL || strings.Contains(b.OwnerURL, addr) {
		t.Errorf("the plugin exposed %s; ingress %s, owner %s", addr, b.IngressURL, b.OwnerURL)
	}
	inv := decodeInvite(t, b.Invite)
	if inv.Transports[0].Type != "stub" || inv.Transports[0].Address != "room.stub.invalid" || inv.Transports[1].Type != "loopback" {
		t.Errorf("transports %+v", inv.Transports)
	}
	<-p.opened

	jout, jerr, jcode := inProcess(t, dir, reg, make(chan os.Signal, 1), map[string]string{"XDG_CONFIG_HOME": cfg},
		"join", b.Invite, "--name", "far", "--no-hold", "--json")
	if c := waitCode(t, jcode, jerr); c != 0 {
		t.Fatalf("join exit %d\n%s", c, jerr.String())
	}
	var g map[string]any
	if err := json.Unmarshal([]byte(jout.String()), &g); err != nil {
		t.Fatal(err)
	}
	jopts := <-p.opened
	if want := filepath.Join(cfg, "commonroom", "transport", "stub"); !jopts.Joining || jopts.StateDir != want {
		t.Errorf("join options %+v, want Joining and %s", jopts, want)
	}
	if g["transport"] != "stub" || g["url"] != "http://room.stub.invalid:4443" {
		t.Errorf("join %v", g)
	}
	of, err := readOwnerFile(filepath.Join(dir, "idea.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body := httpDo(t, "GET", of.OwnerURL+"/workspace/participants", of.OperatorToken, nil)
	var ps []room.Participant
	json.Unmarshal(body, &ps)
	labelled := false
	for _, pt := range ps {
		labelled = labelled || pt.ParticipantID == g["participant_id"] && pt.Transport != nil && *pt.Transport == "stub"
	}
	if !labelled {
		t.Errorf("participants %s", body)
	}

	sig <- syscall.SIGINT
	if c := waitCode(t, code, stderr); c != 0 {
		t.Fatalf("serve exit %d\n%s", c, stderr.String())
	}
	p.plug.mu.Lock()
	closes := p.plug.closes
	p.plug.mu.Unlock()
	if closes < 1 {
		t.Error("serve did not close the plugin on shutdown")
	}
}
