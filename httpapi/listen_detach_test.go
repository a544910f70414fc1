package httpapi

import "testing"

// A subscriptions/listen stream runs detached from its handler (it took its
// connection from net/http once the acknowledgement was out), so after its
// graceful end the room closes that connection itself, through the
// connection cap's wrapper: the slot is given back, not held by a stream
// that no longer exists nor left for a keep-alive that cannot happen.
func TestListenStreamEndGivesBackItsConnection(t *testing.T) {
	h := newHarness(t, "")
	tok := h.join("agent", agentCaps...).SessionToken
	s, acked := h.listenURIs(t, tok, 1, []string{h.Eng.DocumentURI()})
	if len(acked) != 1 {
		t.Fatalf("acknowledged %v", acked)
	}
	if open := h.API.ingressConns.open.Load(); open < 1 {
		t.Fatalf("ingress holds %d connections with a live stream", open)
	}
	h.CancelListen(t, tok, "1")
	s.ExpectFinal(t)
	idleConns(t, h) // fails unless the stream's own connection was closed by the room
}
