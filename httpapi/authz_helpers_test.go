package httpapi

// Helpers shared by the authorization matrix (authz_matrix_test.go) and the
// hostile-input tests (hostile_test.go). Every name here starts with "az" so
// it cannot collide with the other helper files of the package. Records are
// made through the engine inside the room's writer (actor.Do), never by
// editing rows, with one documented exception: a session holding no
// capability at all, which no invitation can grant (an invitation must grant
// at least one), is made by emptying its invitation's grant before the join.
// Nothing sleeps to wait for time: the room's clock is the harness's fake
// clock, and the few waits on the server (a stream unregistering) are
// bounded polls on a condition.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

// azAgentCaps is the default agent grant (spec §1.5).
var azAgentCaps = []string{"read", "observe", "propose", "checkout", "commit"}

// azP is a principal acting as participant pid with every capability: the
// trusted, in-process way fixtures are made (spec §1.5: in-process callers of
// the engine are trusted). Party rules still see pid.
func azP(pid string) room.Principal {
	return room.Principal{ParticipantID: pid, Caps: room.Caps{room.CapAll}}
}

// azDo runs fn as one command in the room's writer.
func azDo[T any](t testing.TB, h *roomHarness, fn func(tx *room.Tx) (T, error)) T {
	t.Helper()
	out, err := actor.Do(context.Background(), h.Room, "az fixture", fn)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return out
}

// azJoin admits a participant holding exactly caps (nil or empty: none at
// all) and returns its session grant. life is the session's length in
// minutes (0: the default).
func azJoin(t testing.TB, h *roomHarness, name string, caps []string, life int) room.SessionGrant {
	t.Helper()
	return azDo(t, h, func(tx *room.Tx) (room.SessionGrant, error) {
		grant := caps
		if len(grant) == 0 {
			grant = []string{"read"}
		}
		inv, err := h.Eng.CreateInvite(tx, room.Operator(h.Eng.HostID), room.InviteInput{Capabilities: grant})
		if err != nil {
			return room.SessionGrant{}, err
		}
		if len(caps) == 0 {
			// No invitation can grant nothing; a session without any
			// capability is still a state the rules must handle (the
			// capability list is data), so the grant is emptied here.
			if _, err := tx.Querier().ExecContext(tx.Context(),
				`UPDATE invites SET capabilities = '[]' WHERE invite_id = ?`, inv.InviteID); err != nil {
				return room.SessionGrant{}, err
			}
		}
		return h.Eng.Join(tx, room.JoinInput{Secret: inv.Token, Name: name, Kind: "agent", Transport: "test", SessionMinutes: life})
	})
}

// azInvite creates an invitation as the operator and returns it.
func azInvite(t testing.TB, h *roomHarness, caps ...string) room.InviteGrant {
	t.Helper()
	return azDo(t, h, func(tx *room.Tx) (room.InviteGrant, error) {
		return h.Eng.CreateInvite(tx, room.Operator(h.Eng.HostID), room.InviteInput{Capabilities: caps})
	})
}

// azOwnerCookie exchanges a fresh one-time page key for the owner cookie,
// the way a browser opening the printed link does. It returns the key and
// the cookie.
func azOwnerCookie(t testing.TB, h *roomHarness) (string, *http.Cookie) {
	t.Helper()
	r := h.do("POST", h.ownerURL("/owner/key"), h.OpToken, map[string]any{})
	wantOK(t, r)
	key, _ := r.JSON(t)["key"].(string)
	if key == "" {
		t.Fatalf("POST /owner/key gave no key: %s", r.Body)
	}
	r = h.do("GET", h.ownerURL("/?key="+key), "", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("page key exchange: %d %s", r.Status, r.Body)
	}
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == ownerCookie && c.Value != "" {
			return key, &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("page key exchange set no %s cookie: %v", ownerCookie, r.Header)
	return "", nil
}

// azRandomID is an id of the given prefix that names nothing.
func azRandomID(prefix string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// azRoute is one route a handler serves.
type azRoute struct{ Method, Path string }

func (r azRoute) String() string { return r.Method + " " + r.Path }

// azRoutes lists every route a listener's router serves (chi.Walk over the
// real handler), so a table that must cover every route can be checked.
func azRoutes(t testing.TB, handler http.Handler) []azRoute {
	t.Helper()
	routes, ok := handler.(chi.Routes)
	if !ok {
		t.Fatalf("handler %T is not a chi router", handler)
	}
	var out []azRoute
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, azRoute{method, route})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// azWaitSubscribers waits (bounded) until the hub holds n subscribers: a
// stream the client closed is unregistered by its handler a moment later.
func azWaitSubscribers(t testing.TB, h *roomHarness, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for h.Hub.Stats().Subscribers != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub still holds %d subscribers, want %d", h.Hub.Stats().Subscribers, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// azMCPRequest builds a POST /mcp request the way a conforming client does;
// id is raw JSON ("" for a notification).
func azMCPRequest(ctx context.Context, t testing.TB, url, id, method string, params map[string]any, tasks bool, opts ...reqOpt) *http.Request {
	t.Helper()
	req, _, err := mcptest.New(nil, url, "", tasks, "").NewRequest(ctx, mcptest.Request{ID: lsID(id), Method: method, Params: params, Opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// azContains reports every secret (by label) found in text.
func azContains(text string, secrets map[string]string) []string {
	var out []string
	for label, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			out = append(out, label)
		}
	}
	return out
}

// azDoc is harnessDoc followed by n further sections, "Part 0000" …, so
// tests that lease many sections never collide on one.
func azDoc(n int) string {
	var b strings.Builder
	b.WriteString(harnessDoc)
	for i := range n {
		fmt.Fprintf(&b, "\n## Part %04d\n\nitem %d\n", i, i)
	}
	return b.String()
}
