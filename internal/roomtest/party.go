package roomtest

import (
	"context"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// Party is one participant of a test room: its session (embedded, so
// p.SessionToken and p.ParticipantID read as the join's answer), an MCP
// client without the Tasks extension and one declaring it, both on the
// ingress listener as that session.
type Party struct {
	mcptest.Session
	MCP *MCP // without the Tasks extension
	Ext *MCP // declaring it
}

// Invite asks the owner listener, as the operator, for an invitation. in is
// the request body (nil: {}).
func (h *Harness) Invite(in map[string]any) mcptest.Invitation {
	h.T.Helper()
	g, err := mcptest.Invite(context.Background(), h.client, h.Owner.URL, h.OpToken, in)
	if err != nil {
		h.T.Fatal(err)
	}
	return g
}

// InviteCaps creates a one-use invitation granting caps (none: the field
// left out, so the default agent set).
func (h *Harness) InviteCaps(caps ...string) mcptest.Invitation {
	h.T.Helper()
	if len(caps) == 0 {
		return h.Invite(nil)
	}
	return h.Invite(map[string]any{"capabilities": caps})
}

// Redeem joins with an invitation the test made itself (URI, payload or
// secret) under name and requires success.
func (h *Harness) Redeem(invite, name string) Party {
	h.T.Helper()
	g, err := mcptest.Join(context.Background(), h.client, h.Ingress.URL, invite, name, "")
	if err != nil {
		h.T.Fatal(err)
	}
	return h.AsParty(g)
}

// AsParty wraps a session in its two MCP clients.
func (h *Harness) AsParty(g mcptest.Session) Party {
	c := h.MCP(g.SessionToken, false)
	return Party{Session: g, MCP: c, Ext: c.WithTasks(true)}
}

// Join is the one way a test admits a participant: the operator invites
// with caps (none: the default agent grant) and name redeems it on the
// ingress listener. The party holds exactly caps.
func (h *Harness) Join(name string, caps ...string) Party {
	h.T.Helper()
	return h.Redeem(h.InviteCaps(caps...).URI, name)
}

// JoinMany joins n parties holding caps through one multi-use invitation,
// a few joins at a time (named s000, s001, …).
func (h *Harness) JoinMany(t testing.TB, n int, caps ...string) []Party {
	t.Helper()
	inv := h.Invite(map[string]any{"capabilities": caps, "max_uses": n, "max_live_sessions": n})
	gs, err := mcptest.JoinMany(context.Background(), h.client, h.Ingress.URL, inv.URI, "s%03d", "", n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Party, n)
	for i, g := range gs {
		out[i] = h.AsParty(g)
	}
	return out
}
