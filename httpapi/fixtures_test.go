package httpapi

// Fixtures made through the engine inside the room's writer (actor.Do),
// never by editing rows, with one documented exception: a session holding
// no capability at all, which no invitation can grant (an invitation must
// grant at least one), is made by emptying its invitation's grant before
// the join (admit). Also what the authorization matrix and the hostile-input
// tests share: routes walked from the real router, the owner cookie, random
// ids. Nothing sleeps to wait for time: the room's clock is the harness's
// fake clock, and the few waits on the server (a stream unregistering) are
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

// agentCaps is the default agent grant (spec §1.5).
var agentCaps = []string{"read", "observe", "propose", "checkout", "commit"}

// trusted is a principal acting as participant pid with every capability: the
// trusted, in-process way fixtures are made (spec §1.5: in-process callers of
// the engine are trusted). Party rules still see pid.
func trusted(pid string) room.Principal {
	return room.Principal{ParticipantID: pid, Caps: room.Caps{room.CapAll}}
}

// inWriter runs fn as one command in the room's writer.
func inWriter[T any](t testing.TB, h *roomHarness, fn func(tx *room.Tx) (T, error)) T {
	t.Helper()
	out, err := actor.Do(context.Background(), h.Room, "az fixture", fn)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return out
}

// admit is join done inside the room's writer, for the two sessions no
// invitation over HTTP can make: one holding no capability at all (caps nil
// or empty) and one of a chosen length (life in minutes; 0: the default).
// It returns the same party join does.
func (h *roomHarness) admit(t testing.TB, name string, caps []string, life int) party {
	t.Helper()
	return h.asParty(sessionGrant(inWriter(t, h, func(tx *room.Tx) (room.SessionGrant, error) {
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
	})))
}

// fixtureInvite creates an invitation as the operator and returns it.
func (h *roomHarness) fixtureInvite(t testing.TB, caps ...string) room.InviteGrant {
	t.Helper()
	return inWriter(t, h, func(tx *room.Tx) (room.InviteGrant, error) {
		return h.Eng.CreateInvite(tx, room.Operator(h.Eng.HostID), room.InviteInput{Capabilities: caps})
	})
}

// pageCookie exchanges a fresh one-time page key for the owner cookie,
// the way a browser opening the printed link does. It returns the key and
// the cookie.
func (h *roomHarness) pageCookie(t testing.TB) (string, *http.Cookie) {
	t.Helper()
	r := h.do("POST", h.OwnerURL("/owner/key"), h.OpToken, map[string]any{})
	wantOK(t, r)
	key, _ := r.JSON(t)["key"].(string)
	if key == "" {
		t.Fatalf("POST /owner/key gave no key: %s", r.Body)
	}
	r = h.do("GET", h.OwnerURL("/?key="+key), "", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("page key exchange: %d %s", r.Status, r.Body)
	}
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == h.API.pages.name && c.Value != "" {
			return key, &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("page key exchange set no %s cookie: %v", h.API.pages.name, r.Header)
	return "", nil
}

// randomID is an id of the given prefix that names nothing.
func randomID(prefix string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// servedRoute is one route a handler serves.
type servedRoute struct{ Method, Path string }

func (r servedRoute) String() string { return r.Method + " " + r.Path }

// walkRoutes lists every route a listener's router serves (chi.Walk over the
// real handler), so a table that must cover every route can be checked.
func walkRoutes(t testing.TB, handler http.Handler) []servedRoute {
	t.Helper()
	routes, ok := handler.(chi.Routes)
	if !ok {
		t.Fatalf("handler %T is not a chi router", handler)
	}
	var out []servedRoute
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, servedRoute{method, route})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// routePatterns is walkRoutes as "METHOD /path" strings.
func routePatterns(t testing.TB, handler http.Handler) []string {
	t.Helper()
	var out []string
	for _, r := range walkRoutes(t, handler) {
		out = append(out, r.String())
	}
	return out
}

// waitSubscribers waits (bounded) until the hub holds n subscribers: a
// stream the client closed is unregistered by its handler a moment later.
func (h *roomHarness) waitSubscribers(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for h.Hub.Stats().Subscribers != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub still holds %d subscribers, want %d", h.Hub.Stats().Subscribers, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// mcpRequest builds a POST /mcp request the way a conforming client does;
// id is raw JSON ("" for a notification).
func mcpRequest(ctx context.Context, t testing.TB, url, id, method string, params map[string]any, tasks bool, opts ...reqOpt) *http.Request {
	t.Helper()
	req, _, err := mcptest.New(nil, url, "", tasks, "").NewRequest(ctx, mcptest.Request{ID: rawID(id), Method: method, Params: params, Opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// leaked reports every secret (by label) found in text.
func leaked(text string, secrets map[string]string) []string {
	var out []string
	for label, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			out = append(out, label)
		}
	}
	return out
}

// manySections is harnessDoc followed by n further sections, "Part 0000" …, so
// tests that lease many sections never collide on one.
func manySections(n int) string {
	var b strings.Builder
	b.WriteString(harnessDoc)
	for i := range n {
		fmt.Fprintf(&b, "\n## Part %04d\n\nitem %d\n", i, i)
	}
	return b.String()
}
