package roomtest

import (
	"bytes"
	"fmt"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// Operator, as Scenario.As, calls with the operator token.
const Operator = "(operator)"

// Scenario is one call at one door and what it must answer: a row of a
// door's table of short cases. It is modelled on pocketbase's
// tests.ApiScenario (a name, the request, the expected status and body
// fragments, hooks before and after), with what this room adds: the party
// that calls, the MCP door beside the plain one, and a check, on every
// refusal, that nothing in the sidecar changed.
type Scenario struct {
	Name string

	// The call: exactly one of Route ("METHOD /path"), Tool (tools/call)
	// and RPC (another JSON-RPC method on /mcp).
	Route string
	Tool  string
	RPC   string
	Owner bool // Route only: the owner listener (default: ingress)
	Tasks bool // Tool and RPC: the client declares the Tasks extension

	// As is who calls: a name in the table's Parties, Operator, or "" for
	// no credential at all.
	As string
	// Body is the request body, the tool's arguments or the method's params;
	// Args, when set, computes it from what Before made.
	Body   any
	Args   func(s *Setup) any
	Header map[string]string

	// Status is the expected HTTP status (0: 200).
	Status int
	// Error is the refusal's code: the plain body's "error", or a tool
	// result's structuredContent.error (isError). RPCCode is a JSON-RPC
	// error's code.
	Error   string
	RPCCode int
	// Contains and Lacks are fragments the raw answer must and must not hold.
	Contains []string
	Lacks    []string
	// MayChange excuses a refusal from the nothing-changed check. It is for
	// the rare refusal the rules let write (a failed attempt that is
	// recorded); say why beside it.
	MayChange bool

	Before func(t testing.TB, s *Setup)
	After  func(t testing.TB, s *Setup, raw []byte)
}

// Setup is what one scenario runs against: the room, the table's parties
// joined in it, and what Before made (Vars).
type Setup struct {
	H       *Harness
	Parties map[string]Party
	Vars    map[string]string
}

// Token is the bearer of as (a party's name, Operator, or "" for none).
func (s *Setup) Token(t testing.TB, as string) string {
	t.Helper()
	switch as {
	case "":
		return ""
	case Operator:
		return s.H.OpToken
	}
	p, ok := s.Parties[as]
	if !ok {
		t.Fatalf("scenario names party %q, which the table does not join", as)
	}
	return p.SessionToken
}

// refusal reports whether the scenario expects a refusal.
func (sc *Scenario) refusal() bool {
	return sc.Status >= 400 || sc.Error != "" || sc.RPCCode != 0
}

// Scenarios is a door's table of short cases.
type Scenarios struct {
	// Open opens a fresh room for each case (pocketbase's TestAppFactory):
	// no case sees another's records.
	Open func(t testing.TB) *Harness
	// Parties are joined, in this order, before each case: name → the
	// exact capabilities it holds (empty: the default agent grant).
	Parties []PartySpec
	Cases   []Scenario
	// Prepare, when set, runs once per room after the parties joined: the
	// records every case of the table works on (pocketbase's test app
	// factory seeding its data), kept in Setup.Vars.
	Prepare func(t testing.TB, s *Setup)
	// Shared opens one room for the whole table, for tables of reads where
	// no case changes what another sees (every refusal is still checked to
	// change nothing).
	Shared bool
}

// PartySpec is a party a table joins for every case.
type PartySpec struct {
	Name string
	Caps []string
}

// Run runs every case as a subtest named by its Name.
func (ss Scenarios) Run(t *testing.T) {
	t.Helper()
	seen := map[string]bool{}
	var shared *Setup
	setup := func(t testing.TB) *Setup {
		if shared != nil {
			return shared
		}
		h := ss.Open(t)
		s := &Setup{H: h, Parties: map[string]Party{}, Vars: map[string]string{}}
		for _, p := range ss.Parties {
			s.Parties[p.Name] = h.Join(p.Name, p.Caps...)
		}
		if ss.Prepare != nil {
			ss.Prepare(t, s)
		}
		if ss.Shared {
			shared = s
		}
		return s
	}
	if ss.Shared {
		setup(t)
	}
	for _, sc := range ss.Cases {
		if seen[sc.Name] {
			t.Fatalf("two scenarios are named %q", sc.Name)
		}
		seen[sc.Name] = true
		t.Run(sc.Name, func(t *testing.T) {
			sc.Run(t, setup(t))
		})
	}
}

// Run runs one scenario against s: Before, the call, the checks, After.
func (sc Scenario) Run(t testing.TB, s *Setup) {
	t.Helper()
	if n := btoi(sc.Route != "") + btoi(sc.Tool != "") + btoi(sc.RPC != ""); n != 1 {
		t.Fatalf("scenario %q: give exactly one of Route, Tool and RPC", sc.Name)
	}
	if sc.Before != nil {
		sc.Before(t, s)
	}
	body := sc.Body
	if sc.Args != nil {
		body = sc.Args(s)
	}
	var before Snapshot
	if sc.refusal() && !sc.MayChange {
		before = s.H.SnapshotT(t)
	}
	token := s.Token(t, sc.As)
	var raw []byte
	switch {
	case sc.Route != "":
		raw = sc.runRoute(t, s, token, body)
	default:
		raw = sc.runMCP(t, s, token, body)
	}
	for _, f := range sc.Contains {
		if !bytes.Contains(raw, []byte(f)) {
			t.Errorf("answer lacks %q: %.600s", f, raw)
		}
	}
	for _, f := range sc.Lacks {
		if bytes.Contains(raw, []byte(f)) {
			t.Errorf("answer holds %q, want it absent: %.600s", f, raw)
		}
	}
	if before != nil {
		s.H.AssertUnchanged(t, before)
	}
	if sc.After != nil {
		sc.After(t, s, raw)
	}
}

func (sc Scenario) runRoute(t testing.TB, s *Setup, token string, body any) []byte {
	t.Helper()
	method, path, ok := strings.Cut(sc.Route, " ")
	if !ok {
		t.Fatalf("scenario %q: Route %q is not \"METHOD /path\"", sc.Name, sc.Route)
	}
	url := s.H.IngressURL(path)
	if sc.Owner {
		url = s.H.OwnerURL(path)
	}
	if m, ok := body.(map[string]any); ok && method == http.MethodGet {
		// A GET's arguments are its query, as every door's client sends them.
		q := neturl.Values{}
		for k, v := range m {
			q.Set(k, fmt.Sprint(v))
		}
		url += "?" + q.Encode()
		body = nil
	}
	var opts []mcptest.ReqOpt
	for k, v := range sc.Header {
		opts = append(opts, mcptest.WithHeader(k, v))
	}
	r := s.H.Do(t, method, url, token, body, opts...)
	want := sc.Status
	if want == 0 {
		want = http.StatusOK
	}
	switch {
	case sc.Error != "":
		WantError(t, r, want, sc.Error)
	case r.Status != want:
		t.Fatalf("%s: status = %d, want %d; body %.600s", sc.Route, r.Status, want, r.Body)
	}
	return r.Body
}

func (sc Scenario) runMCP(t testing.TB, s *Setup, token string, body any) []byte {
	t.Helper()
	c := s.H.MCP(token, sc.Tasks)
	params, _ := body.(map[string]any)
	if body != nil && params == nil {
		t.Fatalf("scenario %q: MCP arguments must be a map[string]any, got %T", sc.Name, body)
	}
	q := mcptest.Request{Method: sc.RPC, Params: params}
	if sc.Tool != "" {
		q = mcptest.Request{Method: "tools/call", Params: map[string]any{"name": sc.Tool}}
		if params != nil {
			q.Params["arguments"] = params
		}
	}
	for k, v := range sc.Header {
		q.Opts = append(q.Opts, mcptest.WithHeader(k, v))
	}
	r := c.Do(t, q)
	want := sc.Status
	if want == 0 {
		want = http.StatusOK
	}
	switch {
	case sc.RPCCode != 0:
		WantRPCError(t, r, want, sc.RPCCode)
	case sc.Tool != "" && sc.Error != "":
		WantToolError(t, sc.Tool, WantResult(t, r), sc.Error)
	case sc.Tool != "":
		res := WantResult(t, r)
		if res["isError"] == true {
			t.Fatalf("%s: isError, want a result: %.600s", sc.Tool, r.Raw)
		}
	case r.Status != want:
		t.Fatalf("%s: status = %d, want %d; body %.600s", sc.RPC, r.Status, want, r.Raw)
	}
	return r.Raw
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
