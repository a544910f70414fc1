package httpapi

// The authorization matrix (issue #8 item 3): one table, written once, of
// every operation a client can reach — every MCP tool of the catalog,
// tasks/get|update|cancel, resources/read, resources/subscribe,
// subscriptions/listen with a taskId, and every HTTP route either listener
// serves (the operations table's and the hand-wired ones) — with the capability it needs and the party
// rule it applies (ARCHITECTURE.md D1–D4, D12, D15, D17, D23, D35). For the
// operations table's rows the capability is the table's own (tableCaps) and
// the route and tool rows are built from it; what the table cannot say (the
// party rule, the record, the input) is written here once per operation. Each
// operation is called by every capability set (none, each single capability,
// the default agent set, *) in every party role its records allow (owner,
// assignee, third party, the open call; admin is the admin and * sets), by
// no session, an unknown token, an expired session, and on the owner
// listener by the operator token and the owner-page cookie (with and without
// the page's own Origin). The expected answer is computed from the spec's
// rules by expectFor, not read from the code; every case asserts either an
// allow (a 2xx / non-error result, or the exact state error the rules
// predict) or the exact denial at that door: HTTP 401 unauthorized /
// session_expired, 403 permission_denied with required: <cap> (and without
// it for party denials), 404 task_not_found / handoff_not_found, MCP isError
// permission_denied, JSON-RPC -31001 for no session, -32602 "unknown task".
// A mutating case works on records made for it alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

type door int

const (
	doorREST   door = iota // a plain HTTP route
	doorTool               // tools/call on POST /mcp
	doorRPC                // another JSON-RPC method on POST /mcp
	doorListen             // subscriptions/listen with a taskId
)

// rule is how an operation decides who may call it, beyond its capability.
type rule int

const (
	rulePublic             rule = iota // no credential at all
	ruleInvitation                     // the invitation secret is the credential (join)
	ruleOwnerPage                      // the owner page: the owner cookie only
	ruleIngressOnly                    // an ingress operation on the owner listener: 404 for everyone
	ruleParticipantPage                // a participant's page (issue 28): its cookie only, which no matrix caller holds (participant_page_test.go)
	ruleCapOnly                        // a session (or the operator) holding Cap
	ruleSessionOnly                    // any session: leave (spec §1.5)
	ruleTrustedOnly                    // the local operator (token or page cookie)
	ruleOperatorBearer                 // the operator token itself: POST /owner/key, /debug/* (issue 13)
	ruleInviteCreator                  // invite, and the invitation is one's own unless admin (issue 13)
	ruleInviteGrant                    // invite, and grant only what one holds unless admin
	ruleLeaseHolder                    // checkout, and hold the lease (renew)
	ruleLeaseHolderOrAdmin             // checkout, and hold the lease or be admin (release)
	ruleHandoffRead                    // read + visible (D2)
	ruleHandoffAccept                  // checkout + visible, not the owner, addressed to you or nobody (D3)
	ruleHandoffAssignee                // checkout + visible + the assignee (request_input, complete)
	ruleHandoffDecide                  // approve, and not the assignee (D12)
	ruleHandoffOwner                   // visible (D2), then the owner or an admin: the task twins (issue 24)
	ruleTaskRead                       // owner, assignee or admin (D1, D2)
	ruleTaskOwner                      // visible, then owner or admin (D1, D4)
	ruleTaskListen                     // acknowledged only for owner, assignee or admin (D17)
)

// fixKind is the record an operation needs, made fresh for each case.
type fixKind int

const (
	fixNone     fixKind = iota
	fixOpen             // an open handoff
	fixAccepted         // an accepted handoff with a working task
	fixInput            // an accepted handoff whose task is input_required (key "k")
	fixResult           // a handoff in result_ready
	fixLease            // a live lease
	fixPending          // a pending proposal
	fixApproved         // an approved proposal on the current version
	fixInvite           // an invitation
	fixSession          // a fresh session holding the caller's capabilities (leave ends it)
	fixSection          // a section nobody holds a lease on
	fixVersion          // the current version (raw commit)
	fixFlooder          // a fresh participant who created one live handoff
	fixVictim           // another participant with a live session, to be ended
)

type listeners int

const (
	onBoth listeners = iota
	onIngressOnly
	onOwnerOnly
)

// matrixOp is one row of the table.
type matrixOp struct {
	Name    string
	Door    door
	Method  string // REST: HTTP method; doorTool: the tool; doorRPC: the JSON-RPC method
	Path    string // REST only
	Cap     room.Capability
	Rule    rule
	Fix     fixKind
	On      listeners
	Serial  bool // commits a version or holds a stream: runs alone
	Stream  bool // a successful answer is an event stream
	MCPAuth bool // a REST route authenticated like /mcp (GET /mcp)
	OK      int  // status of a successful answer; 0 = 200
	In      func(r *records) map[string]any
}

func (op *matrixOp) okStatus() int {
	if op.OK != 0 {
		return op.OK
	}
	return http.StatusOK
}

type callerRole string

const (
	roleNone     callerRole = "-"
	roleOwner    callerRole = "owner"
	roleAssignee callerRole = "assignee"
	roleThird    callerRole = "third-party"
	roleOpen     callerRole = "open-call" // an open handoff addressed to nobody, owned by someone else
)

func (op *matrixOp) roles() []callerRole {
	switch op.Rule {
	case ruleHandoffRead, ruleHandoffAccept, ruleHandoffOwner:
		return []callerRole{roleOwner, roleAssignee, roleThird, roleOpen}
	case ruleHandoffAssignee, ruleHandoffDecide, ruleTaskRead, ruleTaskOwner, ruleTaskListen:
		return []callerRole{roleOwner, roleAssignee, roleThird}
	case ruleLeaseHolder, ruleLeaseHolderOrAdmin, ruleInviteCreator:
		return []callerRole{roleOwner, roleThird}
	}
	return []callerRole{roleNone}
}

// records holds the ids of the records one case works on.
type records struct {
	DocURI      string
	HandoffID   string
	TaskID      string
	LeaseID     string
	ProposalID  string
	InviteID    string
	InviteToken string
	Section     string
	Version     int64
	Token       string // a fresh session (fixSession)
	Participant string // a participant with a live handoff (fixFlooder)
	VictimPID   string // fixVictim: the participant to end
	VictimRef   string // fixVictim: its session
}

func proposeIn(r *records) map[string]any {
	return map[string]any{"target": "Goals", "base_version": 1, "summary": "az",
		"change": map[string]any{"content": "## Goals\n\nproposed\n\n", "section": "Goals"}}
}

func rawCommitIn(r *records) map[string]any {
	return map[string]any{"base_version": r.Version, "summary": "raw", "content": "## Goals\n\nraw\n\n", "target": "Goals"}
}

// opRow is what the matrix adds to one row of the operations table: the
// party rule it applies beyond its capability, the record a case needs, and
// its input. The capability is the table's own (tableCaps), never restated
// here, so the matrix checks that the engine enforces what the table (and so
// /protocol, the agent guide and the catalog golden) publishes. One
// operation may need several matrix rows (Variant names each).
type opRow struct {
	Variant string // "" or what tells this row from its siblings, "(raw)"
	Alt     bool   // needs the table's parenthetical capability: "commit (admin for raw content)"
	Rule    rule
	Fix     fixKind
	In      func(r *records) map[string]any
	Serial  bool // commits a version or holds a stream: runs alone
	Stream  bool
	MCPAuth bool
	On      listeners // the listeners the route is served on (zero: both)
}

// tableCaps reads an operations-table Capability: a capability name, a
// name with an alternative for a variant ("commit (admin for raw
// content)"), "session + <name>", or a party rule in words ("handoff owner
// or admin", "session", "invitation"), which needs no capability.
func tableCaps(text string) (need, alt room.Capability) {
	text = strings.TrimPrefix(text, "session + ")
	head, paren, _ := strings.Cut(text, " (")
	names := room.CapabilityNames()
	if slices.Contains(names, head) {
		need = room.Capability(head)
	}
	if a, _, ok := strings.Cut(paren, " for "); ok && slices.Contains(names, a) {
		alt = room.Capability(a)
	}
	return need, alt
}

// matrixOps is the table. Every operation of ops.Table gets its REST row
// and, when it is a tool, its tool row, with the table's capability; what
// is particular to each is in rows (below), and an operation without an
// entry there fails the test, naming it. The rest (public and owner-only
// routes, the other MCP methods) is written out: no table says those.
func matrixOps() ([]*matrixOp, []string) {
	hid := func(r *records) map[string]any { return map[string]any{"handoff_id": r.HandoffID} }
	ask := func(r *records) map[string]any {
		return map[string]any{"handoff_id": r.HandoffID, "requests": []any{map[string]any{"key": "q", "message": "which one?"}}}
	}
	done := func(r *records) map[string]any {
		return map[string]any{"handoff_id": r.HandoffID, "result": map[string]any{"text": "done"}}
	}
	none := func(*records) map[string]any { return map[string]any{} }
	read := func(r *records) map[string]any { return map[string]any{"section": "Goals"} }
	diff := func(r *records) map[string]any { return map[string]any{"base_version": 1} }
	since := func(r *records) map[string]any { return map[string]any{"version": 1} }
	lease := func(r *records) map[string]any { return map[string]any{"lease_id": r.LeaseID} }
	target := func(r *records) map[string]any { return map[string]any{"target": r.Section} }
	review := func(r *records) map[string]any { return map[string]any{"proposal_id": r.ProposalID, "approve": true} }
	commit := func(r *records) map[string]any { return map[string]any{"proposal_id": r.ProposalID} }
	proposal := func(r *records) map[string]any { return map[string]any{"proposal_id": r.ProposalID} }
	invite := func(r *records) map[string]any { return map[string]any{"capabilities": []string{"read"}} }
	create := func(r *records) map[string]any { return map[string]any{"summary": "az: please do this"} }
	answer := map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}
	answerIn := func(r *records) map[string]any {
		return map[string]any{"handoff_id": r.HandoffID, "input_responses": answer}
	}
	task := func(r *records) map[string]any { return map[string]any{"task_id": r.TaskID} }
	capOnly := func(fix fixKind, in func(*records) map[string]any) []opRow {
		return []opRow{{Rule: ruleCapOnly, Fix: fix, In: in}}
	}
	one := func(rule rule, fix fixKind, in func(*records) map[string]any) []opRow {
		return []opRow{{Rule: rule, Fix: fix, In: in}}
	}

	// rows: operation name (ops.Table) -> its matrix rows. nil: served by
	// the MCP rows below (POST /mcp is the tools' and methods' door).
	rows := map[string][]opRow{
		"session.join": one(ruleInvitation, fixInvite, func(r *records) map[string]any {
			return map[string]any{"invite": r.InviteToken, "name": "joiner"}
		}),
		"session.page": {{Rule: ruleCapOnly, Fix: fixNone, In: none, On: onIngressOnly}}, // the owner listener's 404 is its own row
		"session.join_challenge": one(ruleInvitation, fixInvite, func(r *records) map[string]any {
			return map[string]any{"invite_id": r.InviteID, "client_nonce": room.NewJoinNonce()}
		}),
		"status": capOnly(fixNone, nil), "summary": capOnly(fixNone, nil), "regions": capOnly(fixNone, nil),
		"read": capOnly(fixNone, read), "diff": capOnly(fixNone, diff), "changes_since": capOnly(fixNone, since),
		"history": capOnly(fixNone, nil), "participants": capOnly(fixNone, nil), "leases": capOnly(fixNone, nil),
		"proposals": capOnly(fixNone, nil), "proposal": capOnly(fixPending, proposal),
		"diagnostics": capOnly(fixNone, nil), "room": capOnly(fixNone, nil),
		"proposal.diff":   capOnly(fixPending, proposal),
		"version":         capOnly(fixNone, func(*records) map[string]any { return map[string]any{"version": 1} }),
		"waiting":         capOnly(fixNone, nil),
		"observe":         {{Rule: ruleCapOnly, Serial: true, Stream: true}},
		"checkout":        capOnly(fixSection, target),
		"renew":           one(ruleLeaseHolder, fixLease, lease),
		"release":         one(ruleLeaseHolderOrAdmin, fixLease, lease),
		"propose":         capOnly(fixNone, proposeIn),
		"proposal.review": capOnly(fixPending, review),
		"commit": {
			{Variant: "(proposal)", Rule: ruleCapOnly, Fix: fixApproved, In: commit, Serial: true},
			{Variant: "(raw)", Alt: true, Rule: ruleCapOnly, Fix: fixVersion, In: rawCommitIn, Serial: true},
		},
		"invite":        one(ruleInviteGrant, fixNone, invite),
		"invites":       capOnly(fixNone, nil),
		"invite.revoke": one(ruleInviteCreator, fixInvite, func(r *records) map[string]any { return map[string]any{"invite_id": r.InviteID} }),
		"leave":         one(ruleSessionOnly, fixSession, none),
		"session.end": {
			{Variant: "(participant)", Rule: ruleCapOnly, Fix: fixVictim, In: func(r *records) map[string]any {
				return map[string]any{"participant_id": r.VictimPID}
			}},
			{Variant: "(session)", Rule: ruleCapOnly, Fix: fixVictim, In: func(r *records) map[string]any {
				return map[string]any{"session_ref": r.VictimRef}
			}},
		},
		"handoff.create":        capOnly(fixNone, create),
		"handoff.get":           one(ruleHandoffRead, fixAccepted, hid),
		"handoff.events":        one(ruleHandoffRead, fixAccepted, hid),
		"handoff.list":          capOnly(fixNone, nil),
		"handoff.accept":        one(ruleHandoffAccept, fixOpen, hid),
		"handoff.request_input": one(ruleHandoffAssignee, fixAccepted, ask),
		"handoff.complete":      one(ruleHandoffAssignee, fixAccepted, done),
		"handoff.approve":       one(ruleHandoffDecide, fixResult, hid),
		"handoff.reject":        one(ruleHandoffDecide, fixResult, hid),
		"handoff.cancel":        one(ruleHandoffOwner, fixAccepted, hid),
		"handoff.answer":        one(ruleHandoffOwner, fixInput, answerIn),
		"task.get":              one(ruleTaskRead, fixAccepted, task),
		"task.update": one(ruleTaskOwner, fixInput, func(r *records) map[string]any {
			return map[string]any{"task_id": r.TaskID, "input_responses": answer}
		}),
		"task.cancel":                 one(ruleTaskOwner, fixAccepted, task),
		"participant.cancel_handoffs": capOnly(fixFlooder, func(r *records) map[string]any { return map[string]any{"participant_id": r.Participant} }),
		"mcp":                         nil,
		"mcp.legacy_stream":           {{Rule: ruleCapOnly, Serial: true, Stream: true, MCPAuth: true}},
	}

	del := &matrixOp{Name: "DELETE /mcp", Door: doorREST, Method: "DELETE", Path: "/mcp", Rule: rulePublic, OK: http.StatusMethodNotAllowed}
	put := &matrixOp{Name: "PUT /mcp", Door: doorREST, Method: "PUT", Path: "/mcp", Rule: rulePublic, OK: http.StatusMethodNotAllowed}
	rest := func(method, path string, rule rule) *matrixOp {
		return &matrixOp{Name: method + " " + path, Door: doorREST, Method: method, Path: path, Rule: rule}
	}
	rpc := func(method string, c room.Capability, rule rule, fix fixKind, in func(*records) map[string]any) *matrixOp {
		return &matrixOp{Name: method, Door: doorRPC, Method: method, Cap: c, Rule: rule, Fix: fix, In: in}
	}
	on := func(l listeners, op *matrixOp) *matrixOp { op.On = l; return op }
	named := func(name string, op *matrixOp) *matrixOp { op.Name = name; return op }

	out := []*matrixOp{
		// ---- public and owner-page routes (no table row) ----
		rest("GET", "/healthz", rulePublic),
		rest("GET", "/readyz", rulePublic),
		on(onIngressOnly, named("GET / (ingress)", rest("GET", "/", rulePublic))),
		on(onOwnerOnly, named("GET / (owner page)", rest("GET", "/", ruleOwnerPage))),
		rest("GET", "/page/page.css", rulePublic), // the page's static files, the owner's and a participant's
		rest("GET", "/page/page.js", rulePublic),
		rest("GET", "/page/favicon.svg", rulePublic),
		on(onOwnerOnly, named("GET /page/document (owner page)", rest("GET", "/page/document", ruleOwnerPage))),
		on(onIngressOnly, named("GET /page/document (participant page)", rest("GET", "/page/document", ruleParticipantPage))),
		on(onOwnerOnly, named("POST /session/page (owner listener)", rest("POST", "/session/page", ruleIngressOnly))),
		rest("GET", "/.well-known/agent-workspace", rulePublic),
		rest("GET", "/protocol", rulePublic),
		rest("GET", "/skills", rulePublic),
		rest("GET", "/skills/commonroom", rulePublic),
		del, put,
		rpc("server/discover", "", rulePublic, fixNone, none),

		// ---- the owner listener's own routes ----
		on(onOwnerOnly, rest("GET", "/debug/metrics", ruleOperatorBearer)),
		on(onOwnerOnly, rest("GET", "/metrics", ruleOperatorBearer)),
		on(onOwnerOnly, rest("GET", "/debug/pprof/heap", ruleOperatorBearer)),
		on(onOwnerOnly, rest("POST", "/owner/key", ruleOperatorBearer)),
		on(onOwnerOnly, rest("POST", "/owner/compact", ruleOperatorBearer)),

		// ---- MCP methods (the tasks extension and resources: no table row) ----
		rpc("tasks/get", "", ruleTaskRead, fixAccepted, func(r *records) map[string]any { return map[string]any{"taskId": r.TaskID} }),
		rpc("tasks/update", "", ruleTaskOwner, fixInput, func(r *records) map[string]any {
			return map[string]any{"taskId": r.TaskID, "inputResponses": answer}
		}),
		rpc("tasks/cancel", "", ruleTaskOwner, fixAccepted, func(r *records) map[string]any { return map[string]any{"taskId": r.TaskID} }),
		rpc("resources/read", room.CapRead, ruleCapOnly, fixNone, func(r *records) map[string]any { return map[string]any{"uri": r.DocURI} }),
		rpc("resources/subscribe", room.CapRead, ruleCapOnly, fixNone, func(r *records) map[string]any { return map[string]any{"uri": r.DocURI} }),
		{Name: "subscriptions/listen (taskIds)", Door: doorListen, Method: "subscriptions/listen", Rule: ruleTaskListen,
			Fix: fixAccepted, Serial: true, Stream: true},
	}
	for _, p := range out {
		if p.Door == doorREST && p.Method == "POST" && p.In == nil {
			p.In = none
		}
	}

	// ---- every operation of the table: its route and its tool ----
	var missing []string
	for _, op := range ops.Table {
		specs, ok := rows[op.Name]
		if !ok {
			missing = append(missing, op.Name)
			continue
		}
		need, alt := tableCaps(op.Capability)
		for _, sp := range specs {
			c := need
			if sp.Alt {
				c = alt
			}
			suffix := ""
			if sp.Variant != "" {
				suffix = " " + sp.Variant
			}
			r := &matrixOp{Name: op.HTTP + suffix, Door: doorREST, Method: op.Method(), Path: op.Path(), Cap: c,
				Rule: sp.Rule, Fix: sp.Fix, In: sp.In, Serial: sp.Serial, Stream: sp.Stream, MCPAuth: sp.MCPAuth, On: sp.On}
			out = append(out, r)
			if op.Tool == "" {
				continue
			}
			in := sp.In
			if in == nil {
				in = none
			}
			out = append(out, &matrixOp{Name: "tool " + op.Tool + suffix, Door: doorTool, Method: op.Tool, Cap: c,
				Rule: sp.Rule, Fix: sp.Fix, In: in, Serial: sp.Serial})
		}
	}
	return out, missing
}

// ---- who calls ----

type callerKind int

const (
	callerSession        callerKind = iota // a live bearer session
	callerNone                             // no Authorization header
	callerBogus                            // a bearer that names no session
	callerExpired                          // a session past its expiry
	callerOperator                         // the operator token
	callerCookie                           // the owner-page cookie, with the page's own Origin
	callerCookieNoOrigin                   // the owner-page cookie without an Origin header
)

type caller struct {
	Name  string
	Kind  callerKind
	Caps  []string // callerSession: the exact grant
	Token string
	PID   string
}

// capSets are the capability sets every operation is called with.
var capSets = []struct {
	Name string
	Caps []string
}{
	{"none", nil},
	{"read", []string{"read"}}, {"observe", []string{"observe"}}, {"propose", []string{"propose"}},
	{"checkout", []string{"checkout"}}, {"commit", []string{"commit"}}, {"approve", []string{"approve"}},
	{"invite", []string{"invite"}}, {"admin", []string{"admin"}},
	{"agent", agentCaps}, {"star", []string{"*"}},
}

// ---- the expected answer, from the spec ----

// expectation is what a case must answer. Allow with Code "" is a success; Allow
// with a Code is a call the rules let through that must end in that state
// error; otherwise Code is the exact refusal.
type expectation struct {
	Allow    bool
	Code     string
	Required string // permission_denied's required field; "" = must be absent
	Ack      bool   // listen: the task is acknowledged
}

func capsOf(names []string) room.Caps {
	c, err := room.ParseCaps(names)
	if err != nil {
		panic(err)
	}
	return c
}

// authFor is the authentication step alone: "" when the credential passes at
// this door, else the error code.
func authFor(op *matrixOp, w *caller, l listener) string {
	switch op.Rule {
	case rulePublic, ruleInvitation, ruleOwnerPage, ruleParticipantPage, ruleIngressOnly:
		return ""
	}
	mcp := op.Door != doorREST || op.MCPAuth
	switch w.Kind {
	case callerNone, callerBogus:
		return "unauthorized"
	case callerExpired:
		return "session_expired"
	case callerOperator, callerCookie, callerCookieNoOrigin:
		// D15: /mcp takes sessions only; D23: the operator token and the
		// page cookie exist on the owner listener only.
		if mcp || l == ingressListener {
			return "unauthorized"
		}
	}
	return ""
}

// expectFor computes the answer from the rules of ARCHITECTURE.md D1–D4,
// D12, D15, D17, D23 and D35.
func expectFor(op *matrixOp, w *caller, role callerRole, l listener) expectation {
	allow := expectation{Allow: true}
	deny := func(code, required string) expectation { return expectation{Code: code, Required: required} }
	switch op.Rule {
	case rulePublic, ruleInvitation:
		return allow
	case ruleOwnerPage:
		if w.Kind == callerCookie || w.Kind == callerCookieNoOrigin {
			return allow
		}
		return deny("owner_page", "")
	case ruleParticipantPage:
		return deny("owner_page", "") // the same plain-text 401
	case ruleIngressOnly:
		return deny("not_found", "")
	}
	if code := authFor(op, w, l); code != "" {
		return deny(code, "")
	}
	trusted := w.Kind == callerOperator || w.Kind == callerCookie || w.Kind == callerCookieNoOrigin
	if w.Kind == callerCookieNoOrigin && op.Method != "GET" {
		return deny("permission_denied", "") // D23: cookie writes must name the page's own origin
	}
	caps := capsOf(w.Caps)
	has := func(c room.Capability) bool { return trusted || caps.Has(c) }
	admin := has(room.CapAdmin)
	switch op.Rule {
	case ruleTrustedOnly:
		if !trusted {
			return deny("permission_denied", "")
		}
		return allow
	case ruleOperatorBearer:
		if w.Kind != callerOperator {
			return deny("permission_denied", "")
		}
		return allow
	case ruleSessionOnly:
		if trusted { // the operator holds no session to end
			return expectation{Allow: true, Code: "invalid_request"}
		}
		return allow
	}
	if op.Cap != "" && !has(op.Cap) {
		return deny("permission_denied", string(op.Cap))
	}
	switch op.Rule {
	case ruleInviteGrant:
		if !admin && !has(room.CapRead) {
			return deny("permission_denied", string(room.CapRead)) // grants only what the inviter holds
		}
	case ruleLeaseHolder:
		if role != roleOwner {
			return deny("permission_denied", "")
		}
	case ruleLeaseHolderOrAdmin:
		if role != roleOwner && !admin {
			return deny("permission_denied", "")
		}
	case ruleInviteCreator:
		if role != roleOwner && !admin {
			return deny("unauthorized", "") // someone else's answers as an unknown one
		}
	case ruleHandoffRead, ruleHandoffAccept, ruleHandoffAssignee, ruleHandoffDecide, ruleHandoffOwner:
		party := role == roleOwner || role == roleAssignee
		visible := admin || party || has(room.CapApprove) || (role == roleOpen && has(room.CapCheckout))
		if !visible {
			return deny("handoff_not_found", "")
		}
		switch op.Rule {
		case ruleHandoffAccept:
			if role == roleOwner {
				return deny("permission_denied", "")
			}
			if role == roleThird { // addressed to someone else
				return deny("handoff_conflict", "")
			}
		case ruleHandoffAssignee:
			if role != roleAssignee {
				return deny("permission_denied", "")
			}
		case ruleHandoffDecide:
			if role == roleAssignee {
				return deny("permission_denied", "")
			}
		case ruleHandoffOwner:
			if role != roleOwner && !admin {
				return deny("permission_denied", "")
			}
		}
	case ruleTaskRead, ruleTaskOwner, ruleTaskListen:
		visible := admin || role == roleOwner || role == roleAssignee
		switch op.Rule {
		case ruleTaskListen:
			return expectation{Allow: true, Ack: visible}
		case ruleTaskRead:
			if !visible {
				return deny("task_not_found", "")
			}
		case ruleTaskOwner:
			if !visible {
				return deny("task_not_found", "")
			}
			if role != roleOwner && !admin {
				return deny("permission_denied", "")
			}
		}
	}
	return allow
}

// ---- the harness ----

type matrix struct {
	h       *roomHarness
	A, B    string // the other owner and the other assignee of third-party records
	cookie  *http.Cookie
	docURI  string
	dummy   records // records for cases refused before any lookup
	section atomic.Int64
	streams *http.Client
	run     atomic.Int64
}

type matrixCase struct {
	op   *matrixOp
	who  *caller
	role callerRole
	l    listener
	want expectation
}

func (c *matrixCase) name() string {
	l := "ingress"
	if c.l == ownerListener {
		l = "owner"
	}
	return fmt.Sprintf("%s|%s|%s|%s", l, c.op.Name, c.who.Name, c.role)
}

const matrixSections = 600

func (m *matrix) nextSection(t testing.TB) string {
	n := m.section.Add(1)
	if n >= matrixSections {
		t.Fatalf("out of sections (%d)", matrixSections)
	}
	return fmt.Sprintf("Part %04d", n)
}

func (m *matrix) version(t testing.TB) int64 {
	var v int64
	if err := m.h.Store.Reader.QueryRow(`SELECT max(version) FROM versions`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// handoff makes a handoff in the state fix asks for, with subject in role.
func (m *matrix) handoff(t testing.TB, r *records, subject string, role callerRole, fix fixKind) {
	h := m.h
	owner, assignee, requested := m.A, m.B, ""
	switch role {
	case roleOwner:
		owner = subject
	case roleAssignee:
		assignee = subject
	case roleOpen:
		assignee = ""
	}
	if fix == fixOpen {
		switch role {
		case roleAssignee:
			requested, assignee = subject, ""
		case roleThird:
			requested, assignee = m.B, ""
		default:
			assignee = ""
		}
	}
	res := inWriter(t, h, func(tx *room.Tx) (room.CreateHandoffResult, error) {
		res, err := h.Eng.CreateHandoff(tx, trusted(owner), room.CreateHandoffInput{Summary: "az fixture", Assignee: requested})
		if err != nil || assignee == "" {
			return res, err
		}
		id := res.Handoff.HandoffID
		if _, err := h.Eng.AcceptHandoff(tx, trusted(assignee), room.HandoffIDInput{HandoffID: id}); err != nil {
			return res, err
		}
		switch fix {
		case fixInput:
			_, err = h.Eng.RequestInput(tx, trusted(assignee), room.RequestInputInput{HandoffID: id, Requests: []room.InputRequestSpec{{Key: "k", Message: "which?"}}})
		case fixResult:
			_, err = h.Eng.CompleteHandoff(tx, trusted(assignee), room.CompleteInput{HandoffID: id, Result: room.ResultInput{Text: "the result"}})
		}
		return res, err
	})
	r.HandoffID, r.TaskID = res.Handoff.HandoffID, res.Handoff.TaskID
}

// flooder is a new participant who created one live handoff, for the
// operations that act on a participant's records.
func (m *matrix) flooder(t testing.TB) string {
	g := m.h.admit(t, "flooder", agentCaps, 0)
	inWriter(t, m.h, func(tx *room.Tx) (room.CreateHandoffResult, error) {
		return m.h.Eng.CreateHandoff(tx, trusted(g.ParticipantID), room.CreateHandoffInput{Summary: "az flood"})
	})
	return g.ParticipantID
}

// fixture makes the case's records. Cases refused at authentication work on
// the shared dummy records: nothing may touch them.
func (m *matrix) fixture(t testing.TB, c *matrixCase) *records {
	h := m.h
	if authFor(c.op, c.who, c.l) != "" || (c.who.Kind == callerCookieNoOrigin && c.op.Method != "GET") {
		r := m.dummy
		return &r
	}
	r := &records{DocURI: m.docURI}
	subject := c.who.PID
	switch c.op.Fix {
	case fixOpen, fixAccepted, fixInput, fixResult:
		m.handoff(t, r, subject, c.role, c.op.Fix)
	case fixLease:
		holder := m.B
		if c.role == roleOwner {
			holder = subject
		}
		section := m.nextSection(t)
		l := inWriter(t, h, func(tx *room.Tx) (room.Lease, error) {
			return h.Eng.Checkout(tx, trusted(holder), room.CheckoutInput{Target: section})
		})
		r.LeaseID = l.LeaseID
	case fixPending, fixApproved:
		p := inWriter(t, h, func(tx *room.Tx) (room.Proposal, error) {
			base := int64(1)
			if c.op.Fix == fixApproved {
				if err := tx.Querier().QueryRowContext(tx.Context(), `SELECT max(version) FROM versions`).Scan(&base); err != nil {
					return room.Proposal{}, err
				}
			}
			content := fmt.Sprintf("## Goals\n\nproposal %d\n\n", m.section.Add(0))
			p, err := h.Eng.Propose(tx, trusted(m.A), room.ProposeInput{Target: "Goals", BaseVersion: base, Summary: "az",
				Change: room.ChangeInput{Content: &content, Section: "Goals"}})
			if err != nil || c.op.Fix == fixPending {
				return p, err
			}
			yes := true
			_, err = h.Eng.Review(tx, trusted(m.A), room.ReviewInput{ProposalID: p.ProposalID, Approve: &yes})
			return p, err
		})
		r.ProposalID = p.ProposalID
	case fixInvite:
		creator := h.Eng.HostID
		switch c.role {
		case roleOwner:
			creator = subject
		case roleThird:
			creator = m.A
		}
		inv := inWriter(t, h, func(tx *room.Tx) (room.InviteGrant, error) {
			return h.Eng.CreateInvite(tx, room.Principal{ParticipantID: creator, Caps: room.Caps{room.CapAll}},
				room.InviteInput{Capabilities: []string{"read"}})
		})
		r.InviteID, r.InviteToken = inv.InviteID, inv.Token
	case fixVictim:
		g := h.admit(t, "victim", []string{"read"}, 0)
		r.VictimPID, r.VictimRef = g.ParticipantID, g.SessionRef
	case fixSession:
		if c.who.Kind == callerSession {
			r.Token = h.admit(t, "leaver "+c.who.Name, c.who.Caps, 0).SessionToken
		}
	case fixSection:
		r.Section = m.nextSection(t)
	case fixVersion:
		r.Version = m.version(t)
	case fixFlooder:
		r.Participant = m.flooder(t)
	}
	return r
}

// ---- calling, door by door ----

// outcome is an answer reduced to what the matrix compares.
type outcome struct {
	Status   int
	Raw      []byte
	OK       bool
	IsError  bool    // an MCP tool result with isError
	Code     string  // the Commonroom error code, wherever this door carries it
	RPC      int     // the JSON-RPC error code; 0 for none
	Message  string  // the JSON-RPC error message
	Required *string // permission_denied's required field; nil when absent
	Ack      []string
}

func (g outcome) String() string {
	b := g.Raw
	if len(b) > 400 {
		b = b[:400]
	}
	return fmt.Sprintf("%d %s", g.Status, b)
}

func requiredOf(m map[string]any) *string {
	if v, ok := m["required"]; ok {
		s := fmt.Sprint(v)
		return &s
	}
	return nil
}

// readRPCOutcome fills got from a JSON-RPC answer body.
func readRPCOutcome(got *outcome, body []byte) {
	var m struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil {
		return
	}
	if m.Error != nil {
		got.RPC, got.Message = m.Error.Code, m.Error.Message
		if m.Error.Data != nil {
			got.Code, _ = m.Error.Data["error"].(string)
			got.Required = requiredOf(m.Error.Data)
		}
		return
	}
	if m.Result == nil {
		return
	}
	if m.Result["isError"] == true {
		got.IsError = true
		sc, _ := m.Result["structuredContent"].(map[string]any)
		got.Code, _ = sc["error"].(string)
		got.Required = requiredOf(sc)
		return
	}
	got.OK = got.Status == http.StatusOK
}

func (m *matrix) base(l listener) string {
	if l == ownerListener {
		return m.h.Owner.URL
	}
	return m.h.Ingress.URL
}

// credentials applies the caller's credential to a request.
func (m *matrix) credentials(c *matrixCase, rec *records, req *http.Request) {
	token := c.who.Token
	if c.op.Fix == fixSession && rec.Token != "" {
		token = rec.Token
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch c.who.Kind {
	case callerCookie:
		req.AddCookie(m.cookie)
		req.Header.Set("Origin", m.base(c.l))
	case callerCookieNoOrigin:
		req.AddCookie(m.cookie)
	}
}

func (m *matrix) call(t *testing.T, c *matrixCase, rec *records) outcome {
	t.Helper()
	var in map[string]any
	if c.op.In != nil {
		in = c.op.In(rec)
	}
	var req *http.Request
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), frameWait)
	switch c.op.Door {
	case doorREST:
		u := m.base(c.l) + c.op.Path
		var body *strings.Reader
		if c.op.Method == "GET" {
			q := url.Values{}
			for k, v := range in {
				q.Set(k, fmt.Sprint(v))
			}
			if len(q) > 0 {
				u += "?" + q.Encode()
			}
		} else if c.op.Method == "POST" {
			if in == nil {
				in = map[string]any{}
			}
			b, _ := json.Marshal(in)
			body = strings.NewReader(string(b))
		}
		if body != nil {
			req, err = http.NewRequestWithContext(ctx, c.op.Method, u, body)
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
			}
		} else {
			req, err = http.NewRequestWithContext(ctx, c.op.Method, u, nil)
		}
		if err == nil && c.op.Stream {
			req.Header.Set("Accept", "text/event-stream")
		}
	case doorTool:
		req = mcpRequest(ctx, t, m.base(c.l)+"/mcp", "7", "tools/call", map[string]any{"name": c.op.Method, "arguments": in}, false)
	case doorRPC:
		req = mcpRequest(ctx, t, m.base(c.l)+"/mcp", "7", c.op.Method, in, true)
	case doorListen:
		req = mcpRequest(ctx, t, m.base(c.l)+"/mcp", `"az"`, "subscriptions/listen",
			map[string]any{"notifications": map[string]any{"taskIds": []string{rec.TaskID}}}, true)
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m.credentials(c, rec, req)

	got := outcome{}
	if c.op.Stream {
		s, rep := openStream(t, m.streams, req, cancel, c.name())
		if s != nil {
			got.Status, got.OK = http.StatusOK, true
			if c.op.Door == doorListen {
				s.ID = `"az"`
				s.Start()
				ack := s.Ack(t)
				got.Ack = []string{}
				if raw, ok := ack["taskIds"]; ok {
					got.Ack = decodeStrings(t, raw)
				}
			}
			s.Close()
			m.h.waitSubscribers(t, 0)
			return got
		}
		got.Status, got.Raw = rep.Status, rep.Raw
	} else {
		defer cancel()
		res, err := m.h.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name(), err)
		}
		b, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		if rerr != nil {
			t.Fatalf("%s: reading the answer: %v", c.name(), rerr)
		}
		got.Status, got.Raw = res.StatusCode, b
		if ct := res.Header.Get("Content-Type"); got.Status >= 400 && c.op.Rule != ruleOwnerPage && c.op.Rule != ruleParticipantPage && !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: error answer %d with Content-Type %q", c.name(), got.Status, ct)
		}
	}
	if c.op.Door != doorREST || c.op.MCPAuth {
		readRPCOutcome(&got, got.Raw)
		return got
	}
	var body map[string]any
	if json.Unmarshal(got.Raw, &body) == nil {
		got.Code, _ = body["error"].(string)
		got.Required = requiredOf(body)
	}
	got.OK = got.Status == c.op.okStatus() && got.Code == ""
	return got
}

var httpStatusOf = map[string]int{
	"unauthorized": 401, "session_expired": 401, "permission_denied": 403, "handoff_not_found": 404,
	"task_not_found": 404, "handoff_conflict": 409, "invalid_request": 400, "owner_page": 401, "not_found": 404,
}

// authzCodes are the answers that mean "not allowed".
var authzCodes = []string{"unauthorized", "session_expired", "permission_denied", "handoff_not_found", "task_not_found"}

// check compares an answer with the expectation, at the case's door.
func (c *matrixCase) check(t *testing.T, got outcome) {
	t.Helper()
	want := c.want
	if want.Allow && want.Code == "" {
		if !got.OK {
			t.Errorf("%s: want allowed, got %s", c.name(), got)
			return
		}
		if c.op.Rule == ruleTaskListen {
			if acked := len(got.Ack) > 0; acked != want.Ack {
				t.Errorf("%s: acknowledged taskIds %v, want the task acknowledged = %v", c.name(), got.Ack, want.Ack)
			}
		}
		return
	}
	if want.Allow && slices.Contains(authzCodes, got.Code) {
		t.Errorf("%s: allowed by the rules (ending in %s), got an authorization error: %s", c.name(), want.Code, got)
		return
	}
	code := want.Code
	switch {
	case c.op.Rule == ruleOwnerPage || c.op.Rule == ruleParticipantPage:
		if got.Status != httpStatusOf[code] {
			t.Errorf("%s: want %d, got %s", c.name(), httpStatusOf[code], got)
		}
		return
	case c.op.Door == doorREST && !c.op.MCPAuth:
		if got.Status != httpStatusOf[code] || got.Code != code {
			t.Errorf("%s: want %d %s, got %s", c.name(), httpStatusOf[code], code, got)
			return
		}
	case code == "unauthorized" || code == "session_expired":
		if got.Status != 401 || got.RPC != mcptest.CodeUnauthorized || got.Code != code {
			t.Errorf("%s: want 401 JSON-RPC %d data.error %s, got %s", c.name(), mcptest.CodeUnauthorized, code, got)
			return
		}
	case code == "task_not_found":
		if got.Status != 200 || got.RPC != mcptest.CodeInvalidParams || got.Message != "unknown task" {
			t.Errorf("%s: want JSON-RPC -32602 \"unknown task\", got %s", c.name(), got)
			return
		}
	case c.op.Door == doorTool:
		if got.Status != 200 || !got.IsError || got.Code != code {
			t.Errorf("%s: want an isError result with error %s, got %s", c.name(), code, got)
			return
		}
	default:
		if got.Status != 200 || got.RPC != mcptest.CodePermissionDenied || got.Code != code {
			t.Errorf("%s: want JSON-RPC %d data.error %s, got %s", c.name(), mcptest.CodePermissionDenied, code, got)
			return
		}
	}
	if code == "permission_denied" {
		switch {
		case want.Required != "" && (got.Required == nil || *got.Required != want.Required):
			t.Errorf("%s: permission_denied without required: %s; got %s", c.name(), want.Required, got)
		case want.Required == "" && got.Required != nil:
			t.Errorf("%s: a party refusal names a capability (required: %s); got %s", c.name(), *got.Required, got)
		}
	}
}

// ---- the test ----

func TestAuthzMatrix(t *testing.T) {
	h := newHarness(t, manySections(matrixSections), harnessOpts{
		Limits: func(l *room.Limits) {
			l.RateLimitPerMinute = 0 // thousands of calls per session
			l.MaxActiveTasks = 1 << 20
			l.MaxTasksPerParticipant = 1 << 20
			l.MaxLiveSessions = 1 << 20
			l.MaxPendingProposals = 1 << 20 // every case proposes afresh
			l.MaxPendingProposalsPerParticipant = 1 << 20
		},
		InMemory: true,
	})
	m := &matrix{h: h, docURI: h.Eng.DocumentURI(), streams: streamClient()}
	m.A = h.admit(t, "other owner", append(slices.Clone(agentCaps), "approve"), 0).ParticipantID
	m.B = h.admit(t, "other assignee", agentCaps, 0).ParticipantID
	_, m.cookie = h.pageCookie(t)

	// The callers.
	var subjects []*caller
	for _, cs := range capSets {
		g := h.admit(t, "subject "+cs.Name, cs.Caps, 0)
		subjects = append(subjects, &caller{Name: cs.Name, Kind: callerSession, Caps: cs.Caps, Token: g.SessionToken, PID: g.ParticipantID})
	}
	subject := func(name string) *caller {
		for _, s := range subjects {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no subject %s", name)
		return nil
	}
	expired := h.admit(t, "expired", agentCaps, 1)
	h.Clock.Advance(2 * time.Minute) // that session is over, no other is
	host := h.Eng.HostID
	noSession := &caller{Name: "no-session", Kind: callerNone}
	bogus := &caller{Name: "unknown-token", Kind: callerBogus, Token: randomID("ses")}
	exp := &caller{Name: "expired", Kind: callerExpired, Caps: agentCaps, Token: expired.SessionToken, PID: expired.ParticipantID}
	operator := &caller{Name: "operator-token", Kind: callerOperator, Token: h.OpToken, PID: host}
	cookie := &caller{Name: "owner-cookie", Kind: callerCookie, PID: host}
	cookieNoOrigin := &caller{Name: "owner-cookie-no-origin", Kind: callerCookieNoOrigin, PID: host}
	callers := map[listener][]*caller{
		ingressListener: append(slices.Clone(subjects), noSession, bogus, exp, operator, cookie),
		ownerListener:   {operator, cookie, cookieNoOrigin, noSession, exp, subject("star"), subject("agent")},
	}

	// Records for cases refused before any lookup.
	m.handoff(t, &m.dummy, m.A, roleThird, fixInput)
	m.dummy.DocURI = m.docURI
	dl := inWriter(t, h, func(tx *room.Tx) (room.Lease, error) {
		return h.Eng.Checkout(tx, trusted(m.B), room.CheckoutInput{Target: "Plan"})
	})
	m.dummy.LeaseID, m.dummy.Section, m.dummy.Version = dl.LeaseID, "Plan", 1
	inv := h.fixtureInvite(t, "read")
	m.dummy.InviteID, m.dummy.InviteToken = inv.InviteID, inv.Token
	dp := inWriter(t, h, func(tx *room.Tx) (room.Proposal, error) {
		c := "## Goals\n\ndummy\n\n"
		return h.Eng.Propose(tx, trusted(m.A), room.ProposeInput{Target: "Goals", BaseVersion: 1, Summary: "dummy",
			Change: room.ChangeInput{Content: &c, Section: "Goals"}})
	})
	m.dummy.ProposalID = dp.ProposalID
	m.dummy.Participant = m.flooder(t)

	ops, missing := matrixOps()

	t.Run("the table covers every route, every tool, and every operation", func(t *testing.T) {
		for _, name := range missing {
			t.Errorf("operation %s (ops.Table) has no matrix row: say its party rule, fixture and input in matrixOps", name)
		}
		for _, l := range []struct {
			l       listener
			name    string
			handler http.Handler
		}{{ingressListener, "ingress", h.API.IngressHandler()}, {ownerListener, "owner", h.API.OwnerHandler()}} {
			for _, rt := range walkRoutes(t, l.handler) {
				if rt == (servedRoute{"POST", "/mcp"}) {
					continue // the MCP rows
				}
				found := false
				for _, op := range ops {
					if op.Door == doorREST && op.Method == rt.Method && pathMatches(rt.Path, op.Path) && serves(op, l.l) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s listener route %s has no row in the authorization table", l.name, rt)
				}
			}
		}
		for _, tl := range toolCatalog() {
			if !slices.ContainsFunc(ops, func(op *matrixOp) bool { return op.Door == doorTool && op.Method == tl.Name }) {
				t.Errorf("tool %s has no row in the authorization table", tl.Name)
			}
		}
	})

	t.Run("unknown and foreign ids are indistinguishable", func(t *testing.T) {
		indistinguishable(t, m, subject("agent"))
	})

	// The matrix. Serial cases (version commits, streams) run first, in
	// order; the rest run in parallel once the loop has queued them.
	var cases []*matrixCase
	for _, l := range []listener{ingressListener, ownerListener} {
		for _, op := range ops {
			if !serves(op, l) {
				continue
			}
			for _, w := range callers[l] {
				roles := op.roles()
				if authFor(op, w, l) != "" {
					roles = []callerRole{roleNone}
				}
				for _, role := range roles {
					if op.Rule == ruleHandoffAccept && role == roleAssignee && w.Kind == callerSession && !capsOf(w.Caps).Has(room.CapCheckout) {
						continue // a handoff cannot be addressed to a participant without checkout (D3)
					}
					c := &matrixCase{op: op, who: w, role: role, l: l}
					c.want = expectFor(op, w, role, l)
					cases = append(cases, c)
				}
			}
		}
	}
	allowed := 0
	for _, c := range cases {
		if c.want.Allow {
			allowed++
		}
	}
	t.Run("matrix", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name(), func(t *testing.T) {
				if !c.op.Serial {
					t.Parallel()
				}
				rec := m.fixture(t, c)
				c.check(t, m.call(t, c, rec))
				m.run.Add(1)
			})
		}
	})
	t.Logf("authorization matrix: %d operations, %d cases run (%d generated: %d allowed, %d refused)",
		len(ops), m.run.Load(), len(cases), allowed, len(cases)-allowed)
	if m.run.Load() != int64(len(cases)) {
		t.Errorf("%d of %d cases completed", m.run.Load(), len(cases))
	}
}

func serves(op *matrixOp, l listener) bool {
	switch op.On {
	case onIngressOnly:
		return l == ingressListener
	case onOwnerOnly:
		return l == ownerListener
	}
	return true
}

// indistinguishable: a task (or handoff) id that names nothing and one
// that names a record the caller may not see get byte-identical answers
// (once the id itself, which the answer echoes, is blanked), on every
// surface, and the foreign record is untouched.
func indistinguishable(t *testing.T, m *matrix, who *caller) {
	h := m.h
	var foreign records
	m.handoff(t, &foreign, m.A, roleThird, fixInput) // owner A, assignee B: who is no party
	unknownTask, unknownHandoff := randomID("task"), randomID("handoff")
	h.Sweep() // flush last_seen now, so the snapshot compares only what the calls could change
	before := h.Snapshot()
	mcp := newMCPClient(h, who.Token, true)
	surfaces := []struct {
		name string
		ask  func(id string) (int, string)
	}{}
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		surfaces = append(surfaces, struct {
			name string
			ask  func(id string) (int, string)
		}{method, func(id string) (int, string) {
			params := map[string]any{"taskId": id}
			if method == "tasks/update" {
				params["inputResponses"] = map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": "x"}}}
			}
			r := mcp.do(t, mcpReq{ID: 41, Method: method, Params: params})
			return r.Status, string(r.Raw)
		}})
	}
	rest := func(name, method, path string, body func(id string) any) {
		surfaces = append(surfaces, struct {
			name string
			ask  func(id string) (int, string)
		}{name, func(id string) (int, string) {
			u := h.IngressURL(path)
			var b any
			if method == "GET" {
				u += "?task_id=" + url.QueryEscape(id)
			} else {
				b = body(id)
			}
			r := h.do(method, u, who.Token, b)
			return r.Status, string(r.Body)
		}})
	}
	rest("GET /workspace/task", "GET", "/workspace/task", nil)
	rest("POST /workspace/task/update", "POST", "/workspace/task/update", func(id string) any {
		return map[string]any{"task_id": id, "input_responses": map[string]any{"k": map[string]any{"action": "accept"}}}
	})
	rest("POST /workspace/task/cancel", "POST", "/workspace/task/cancel", func(id string) any {
		return map[string]any{"task_id": id}
	})
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			us, ub := s.ask(unknownTask)
			fs, fb := s.ask(foreign.TaskID)
			ub, fb = strings.ReplaceAll(ub, unknownTask, "<id>"), strings.ReplaceAll(fb, foreign.TaskID, "<id>")
			if us != fs || ub != fb {
				t.Errorf("unknown id: %d %s\nforeign id: %d %s", us, ub, fs, fb)
			}
			if us == http.StatusOK && !strings.Contains(ub, "unknown task") {
				t.Errorf("the answer is not the unknown-task refusal: %d %s", us, ub)
			}
		})
	}
	// Handoffs too (D2): a session with read but neither approve nor admin,
	// and a handoff addressed to someone else that is no longer open.
	t.Run("handoff_get and GET /workspace/handoff", func(t *testing.T) {
		ask := func(id string) (string, string) {
			r := mcp.do(t, mcpReq{ID: 42, Method: "tools/call", Params: map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": id}}})
			hr := h.do("GET", h.IngressURL("/workspace/handoff?handoff_id="+url.QueryEscape(id)), who.Token, nil)
			return fmt.Sprintf("%d %s", r.Status, r.Raw), fmt.Sprintf("%d %s", hr.Status, hr.Body)
		}
		um, uh := ask(unknownHandoff)
		fm, fh := ask(foreign.HandoffID)
		um, uh = strings.ReplaceAll(um, unknownHandoff, "<id>"), strings.ReplaceAll(uh, unknownHandoff, "<id>")
		fm, fh = strings.ReplaceAll(fm, foreign.HandoffID, "<id>"), strings.ReplaceAll(fh, foreign.HandoffID, "<id>")
		if um != fm {
			t.Errorf("handoff_get: unknown %s\nforeign %s", um, fm)
		}
		if uh != fh {
			t.Errorf("GET /workspace/handoff: unknown %s\nforeign %s", uh, fh)
		}
	})
	// The task twins (issue 24) resolve the handoff the same way: a foreign
	// handoff's cancel and answer are refused exactly as an unknown one's.
	answer := map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": "x"}}}
	for _, twin := range []struct {
		tool, path string
		args       func(id string) map[string]any
	}{
		{"handoff_cancel", "/workspace/handoff/cancel", func(id string) map[string]any { return map[string]any{"handoff_id": id} }},
		{"handoff_answer", "/workspace/handoff/answer", func(id string) map[string]any {
			return map[string]any{"handoff_id": id, "input_responses": answer}
		}},
	} {
		t.Run(twin.tool+" and POST "+twin.path, func(t *testing.T) {
			ask := func(id string) (string, string) {
				r := mcp.do(t, mcpReq{ID: 43, Method: "tools/call", Params: map[string]any{"name": twin.tool, "arguments": twin.args(id)}})
				hr := h.do("POST", h.IngressURL(twin.path), who.Token, twin.args(id))
				return strings.ReplaceAll(fmt.Sprintf("%d %s", r.Status, r.Raw), id, "<id>"),
					strings.ReplaceAll(fmt.Sprintf("%d %s", hr.Status, hr.Body), id, "<id>")
			}
			um, uh := ask(unknownHandoff)
			fm, fh := ask(foreign.HandoffID)
			if um != fm || !strings.Contains(um, "handoff_not_found") {
				t.Errorf("%s: unknown %s\nforeign %s", twin.tool, um, fm)
			}
			if uh != fh || !strings.HasPrefix(uh, "404 ") {
				t.Errorf("POST %s: unknown %s\nforeign %s", twin.path, uh, fh)
			}
		})
	}
	t.Run("the foreign records did not change", func(t *testing.T) {
		h.AssertUnchanged(t, before)
	})
}

// pathMatches reports whether a concrete path is served by a chi route
// pattern (exact, or under a trailing /* wildcard).
func pathMatches(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == path
}
