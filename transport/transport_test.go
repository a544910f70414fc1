package transport

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
)

type fakeProvider struct{ name string }

func (p fakeProvider) Name() string           { return p.name }
func (p fakeProvider) AddFlags(*flag.FlagSet) {}
func (p fakeProvider) Open(context.Context, Options) (Plugin, error) {
	return nil, errors.New("not for opening")
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.Register("zeta", func() Provider { return fakeProvider{"zeta"} })
	r.RegisterPrefix("exec:", func(name string) Provider { return fakeProvider{name} })

	t.Run("loopback is always there", func(t *testing.T) {
		p, err := r.Provider("loopback")
		if err != nil || p.Name() != "loopback" {
			t.Fatalf("loopback: %v %v", p, err)
		}
	})
	t.Run("a registered name and a prefix family resolve", func(t *testing.T) {
		if p, err := r.Provider("zeta"); err != nil || p.Name() != "zeta" {
			t.Fatalf("zeta: %v %v", p, err)
		}
		if p, err := r.Provider("exec:relay"); err != nil || p.Name() != "exec:relay" {
			t.Fatalf("exec:relay: %v %v", p, err)
		}
	})
	t.Run("an unknown name lists what is available", func(t *testing.T) {
		for _, name := range []string{"carrier-pigeon", "exec:", ""} {
			_, err := r.Provider(name)
			if err == nil {
				t.Fatalf("%q resolved", name)
			}
			for _, want := range []string{"exec:NAME", "loopback", "zeta"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q: the error %q does not list %s", name, err, want)
				}
			}
		}
	})
	t.Run("names and providers are sorted", func(t *testing.T) {
		if got := strings.Join(r.Names(), ","); got != "exec:NAME,loopback,zeta" {
			t.Errorf("names %s", got)
		}
		var got []string
		for _, p := range r.Providers() {
			got = append(got, p.Name())
		}
		if strings.Join(got, ",") != "loopback,zeta" {
			t.Errorf("providers %v", got)
		}
	})
}

func TestHintDescribe(t *testing.T) {
	for _, c := range []struct {
		h    Hint
		want string
	}{
		{Hint{Type: "loopback", Address: "127.0.0.1", Port: 8080, Mode: "local"}, "loopback (local, not encrypted) 127.0.0.1:8080"},
		{Hint{Type: "tailscale", Address: "room.example.ts.net", Port: 443, Mode: "private", Encrypted: true}, "tailscale (private, encrypted) room.example.ts.net:443"},
		{Hint{Type: "local", Mode: "local"}, "local (local, not encrypted)"},
	} {
		if got := c.h.Describe(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.h, got, c.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "room")
			c.Close()
		}
	}()
	ctx := context.Background()
	var lb Loopback

	t.Run("exposing a loopback ingress gives its own address", func(t *testing.T) {
		h, err := lb.Expose(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if h.Type != "loopback" || h.Address != "127.0.0.1" || h.Mode != "local" || h.Encrypted || h.HostPort() != ln.Addr().String() {
			t.Fatalf("hint %+v", h)
		}
		c, err := lb.Dial(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "room" {
			t.Fatalf("read %q", b)
		}
	})
	t.Run("a non-loopback ingress is refused", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:80", "192.0.2.1:80", "example.com:80", "no-port"} {
			if _, err := lb.Expose(ctx, addr); !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: %v", addr, err)
			}
		}
	})
	t.Run("a loopback hint naming another machine is never dialled", func(t *testing.T) {
		for _, h := range []Hint{
			{Type: "loopback", Address: "192.0.2.1", Port: 80},
			{Type: "loopback", Address: "example.com", Port: 80},
			{Type: "loopback", Address: "127.0.0.1"},
			{Type: "loopback", Address: "127.0.0.1", Port: 70000},
		} {
			if _, err := lb.Dial(ctx, h); !errors.Is(err, ErrUnavailable) {
				t.Errorf("%+v: %v", h, err)
			}
		}
	})
	t.Run("a dead port is unavailable", func(t *testing.T) {
		dead, _ := net.Listen("tcp", "127.0.0.1:0")
		port := dead.Addr().(*net.TCPAddr).Port
		dead.Close()
		if _, err := lb.Dial(ctx, Hint{Type: "loopback", Port: port}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("dead port: %v", err)
		}
	})
}
