// Package apitest opens a roomtest harness behind ce serve's real front
// door (httpapi.New, both listeners, the event encoder every door presents), for black-box tests
// of the doors and the CLI. httpapi's own white-box tests cannot import it
// (it imports httpapi) and wire the same door themselves.
package apitest

import (
	"net"
	"testing"

	"github.com/commonroom/ce/httpapi"
	"github.com/commonroom/ce/httpapi/present"
	"github.com/commonroom/ce/internal/roomtest"
)

// Harness is a roomtest harness and the front door serving it (replaced on
// Restart).
type Harness struct {
	*roomtest.Harness
	API *httpapi.Server
}

// New opens a room (o.Content, "" for roomtest.Doc) behind httpapi.New;
// server, when set, adjusts the front door's configuration (timeouts, caps).
func New(t testing.TB, o roomtest.Options, server func(*httpapi.Config)) *Harness {
	t.Helper()
	h := &Harness{}
	if o.Hub.Encode == nil {
		o.Hub.Encode = present.EncodeChange
	}
	o.Wire = func(k *roomtest.Harness, ownerLn, ingressLn net.Listener) (owner, ingress roomtest.Door) {
		cfg := httpapi.Config{Room: k.Room, Hub: k.Hub, Logger: k.Log, OperatorToken: k.OpToken, Version: "test"}
		if server != nil {
			server(&cfg)
		}
		h.API = httpapi.New(cfg)
		owner = roomtest.Door{Server: httpapi.NewHTTPServer(h.API.OwnerHandler(), k.Log), Listener: h.API.OwnerListener(ownerLn)}
		ingress = roomtest.Door{Server: httpapi.NewHTTPServer(h.API.IngressHandler(), k.Log), Listener: h.API.IngressListener(ingressLn)}
		return owner, ingress
	}
	h.Harness = roomtest.Open(t, o)
	return h
}

// Open is New with the defaults, shaped for Scenarios.Open.
func Open(t testing.TB) *roomtest.Harness { return New(t, roomtest.Options{}, nil).Harness }
