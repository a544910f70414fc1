package httpapi

// The authorization matrix (issue #8 item 3): one table, written once, of
// every operation a client can reach — every MCP tool of the catalog,
// tasks/get|update|cancel, resources/read, resources/subscribe,
// subscriptions/listen with a taskId, and every HTTP route either listener
// serves (the operations table's and the hand-wired ones) — with the capability it needs and the party
// rule it applies (spec/domain.md §1.4–1.6, D1–D4, D12, D15, D17, D23). Each
// operation is called by every capability set (none, each single capability,
// the default agent set, *) in every party role its records allow (owner,
// assignee, third party, the open call; admin is the admin and * sets), by
// no session, an unknown token, an expired session, and on the owner
// listener by the operator token and the owner-page cookie (with and without
// the page's own Origin). The expected answer is computed from the spec's
// rules by azExpect, not read from the code; every case asserts either an
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

	"github.com/commonroom/ce/room"
)

type azDoor int

const (
	azREST   azDoor = iota // a plain HTTP route
	azTool                 // tools/call on POST /mcp
	azRPC                  // another JSON-RPC method on POST /mcp
	azListen               // subscriptions/listen with a taskId
)

// azRule is how an operation decides who may call it, beyond its capability.
type azRule int

const (
	azPublic             azRule = iota // no credential at all
	azInvitation                       // the invitation secret is the credential (join)
	azOwnerPage                        // the owner page: the owner cookie only
	azCapOnly                          // a session (or the operator) holding Cap
	azSessionOnly                      // any session: leave (spec §1.5)
	azTrustedOnly                      // the local operator (token or page cookie)
	azOperatorBearer                   // the operator token itself: POST /owner/key, /debug/* (issue 13)
	azInviteCreator                    // invite, and the invitation is one's own unless admin (issue 13)
	azInviteGrant                      // invite, and grant only what one holds unless admin
	azLeaseHolder                      // checkout, and hold the lease (renew)
	azLeaseHolderOrAdmin               // checkout, and hold the lease or be admin (release)
	azHandoffRead                      // read + visible (D2)
	azHandoffAccept                    // checkout + visible, not the owner, addressed to you or nobody (D3)
	azHandoffAssignee                  // checkout + visible + the assignee (request_input, complete)
	azHandoffDecide                    // approve, and not the assignee (D12)
	azTaskRead                         // owner, assignee or admin (D1, D2)
	azTaskOwner                        // visible, then owner or admin (D1, D4)
	azTaskListen                       // acknowledged only for owner, assignee or admin (D17)
)

// azFix is the record an operation needs, made fresh for each case.
type azFix int

const (
	azFixNone     azFix = iota
	azFixOpen           // an open handoff
	azFixAccepted       // an accepted handoff with a working task
	azFixInput          // an accepted handoff whose task is input_required (key "k")
	azFixResult         // a handoff in result_ready
	azFixLease          // a live lease
	azFixPending        // a pending proposal
	azFixApproved       // an approved proposal on the current version
	azFixInvite         // an invitation
	azFixSession        // a fresh session holding the caller's capabilities (leave ends it)
	azFixSection        // a section nobody holds a lease on
	azFixVersion        // the current version (raw commit)
	azFixFlooder        // a fresh participant who created one live handoff
	azFixVictim         // another participant with a live session, to be ended
)

type azListeners int

const (
	azBoth azListeners = iota
	azIngressOnly
	azOwnerOnly
)

// azOp is one row of the table.
type azOp struct {
	Name    string
	Door    azDoor
	Method  string // REST: HTTP method; azTool: the tool; azRPC: the JSON-RPC method
	Path    string // REST only
	Cap     room.Capability
	Rule    azRule
	Fix     azFix
	On      azListeners
	Serial  bool // commits a version or holds a stream: runs alone
	Stream  bool // a successful answer is an event stream
	MCPAuth bool // a REST route authenticated like /mcp (GET /mcp)
	OK      int  // status of a successful answer; 0 = 200
	In      func(r *azRec) map[string]any
}

func (op *azOp) okStatus() int {
	if op.OK != 0 {
		return op.OK
	}
	return http.StatusOK
}

type azRole string

const (
	azNoRole   azRole = "-"
	azOwner    azRole = "owner"
	azAssignee azRole = "assignee"
	azThird    azRole = "third-party"
	azOpen     azRole = "open-call" // an open handoff addressed to nobody, owned by someone else
)

func (op *azOp) roles() []azRole {
	switch op.Rule {
	case azHandoffRead, azHandoffAccept:
		return []azRole{azOwner, azAssignee, azThird, azOpen}
	case azHandoffAssignee, azHandoffDecide, azTaskRead, azTaskOwner, azTaskListen:
		return []azRole{azOwner, azAssignee, azThird}
	case azLeaseHolder, azLeaseHolderOrAdmin, azInviteCreator:
		return []azRole{azOwner, azThird}
	}
	return []azRole{azNoRole}
}

// azRec holds the ids of the records one case works on.
type azRec struct {
	DocURI      string
	HandoffID   string
	TaskID      string
	LeaseID     string
	ProposalID  string
	InviteID    string
	InviteToken string
	Section     string
	Version     int64
	Token       string // a fresh session (azFixSession)
	Participant string // a participant with a live handoff (azFixFlooder)
	VictimPID   string // azFixVictim: the participant to end
	VictimRef   string // azFixVictim: its session
}

func azProposeIn(r *azRec) map[string]any {
	return map[string]any{"target": "Goals", "base_version": 1, "summary": "az",
		"change": map[string]any{"content": "## Goals\n\nproposed\n\n", "section": "Goals"}}
}

func azRawCommitIn(r *azRec) map[string]any {
	return map[string]any{"base_version": r.Version, "summary": "raw", "content": "## Goals\n\nraw\n\n", "target": "Goals"}
}

// azOps is the table. Capabilities and rules come from spec/domain.md §1.5
// and D1–D4, D12; the HTTP routes and tools are the
// operations table's (httpapi/ops) and the hand-wired routes of server.go.
func azOps() []*azOp {
	hid := func(r *azRec) map[string]any { return map[string]any{"handoff_id": r.HandoffID} }
	ask := func(r *azRec) map[string]any {
		return map[string]any{"handoff_id": r.HandoffID, "requests": []any{map[string]any{"key": "q", "message": "which one?"}}}
	}
	done := func(r *azRec) map[string]any {
		return map[string]any{"handoff_id": r.HandoffID, "result": map[string]any{"text": "done"}}
	}
	none := func(*azRec) map[string]any { return map[string]any{} }
	read := func(r *azRec) map[string]any { return map[string]any{"section": "Goals"} }
	diff := func(r *azRec) map[string]any { return map[string]any{"base_version": 1} }
	since := func(r *azRec) map[string]any { return map[string]any{"version": 1} }
	lease := func(r *azRec) map[string]any { return map[string]any{"lease_id": r.LeaseID} }
	target := func(r *azRec) map[string]any { return map[string]any{"target": r.Section} }
	review := func(r *azRec) map[string]any { return map[string]any{"proposal_id": r.ProposalID, "approve": true} }
	commit := func(r *azRec) map[string]any { return map[string]any{"proposal_id": r.ProposalID} }
	proposal := func(r *azRec) map[string]any { return map[string]any{"proposal_id": r.ProposalID} }
	invite := func(r *azRec) map[string]any { return map[string]any{"capabilities": []string{"read"}} }
	create := func(r *azRec) map[string]any { return map[string]any{"summary": "az: please do this"} }
	answer := map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}

	rest := func(method, path string, c room.Capability, rule azRule, fix azFix, in func(*azRec) map[string]any) *azOp {
		return &azOp{Name: method + " " + path, Door: azREST, Method: method, Path: path, Cap: c, Rule: rule, Fix: fix, In: in}
	}
	tool := func(name string, c room.Capability, rule azRule, fix azFix, in func(*azRec) map[string]any) *azOp {
		return &azOp{Name: "tool " + name, Door: azTool, Method: name, Cap: c, Rule: rule, Fix: fix, In: in}
	}
	rpc := func(method string, c room.Capability, rule azRule, fix azFix, in func(*azRec) map[string]any) *azOp {
		return &azOp{Name: method, Door: azRPC, Method: method, Cap: c, Rule: rule, Fix: fix, In: in}
	}
	serial := func(op *azOp) *azOp { op.Serial = true; return op }
	stream := func(op *azOp) *azOp { op.Serial, op.Stream = true, true; return op }
	on := func(l azListeners, op *azOp) *azOp { op.On = l; return op }
	named := func(name string, op *azOp) *azOp { op.Name = name; return op }

	legacy := stream(rest("GET", "/mcp", room.CapRead, azCapOnly, azFixNone, nil))
	legacy.MCPAuth = true
	del := rest("DELETE", "/mcp", "", azPublic, azFixNone, nil)
	del.OK = http.StatusMethodNotAllowed
	put := rest("PUT", "/mcp", "", azPublic, azFixNone, nil)
	put.OK = http.StatusMethodNotAllowed

	return []*azOp{
		// ---- public and credential-less routes ----
		rest("GET", "/healthz", "", azPublic, azFixNone, nil),
		on(azIngressOnly, named("GET / (ingress)", rest("GET", "/", "", azPublic, azFixNone, nil))),
		on(azOwnerOnly, named("GET / (owner page)", rest("GET", "/", "", azOwnerPage, azFixNone, nil))),
		on(azOwnerOnly, rest("GET", "/page/page.css", "", azPublic, azFixNone, nil)), // the page's static files
		on(azOwnerOnly, rest("GET", "/page/page.js", "", azPublic, azFixNone, nil)),
		rest("POST", "/session/join", "", azInvitation, azFixInvite, func(r *azRec) map[string]any {
			return map[string]any{"invite": r.InviteToken, "name": "joiner"}
		}),
		rest("GET", "/.well-known/agent-workspace", "", azPublic, azFixNone, nil),
		rest("GET", "/protocol", "", azPublic, azFixNone, nil),
		rest("GET", "/skills", "", azPublic, azFixNone, nil),
		rest("GET", "/skills/commonroom", "", azPublic, azFixNone, nil),
		del, put,
		rpc("server/discover", "", azPublic, azFixNone, none),
		legacy,

		// ---- workspace reads ----
		rest("GET", "/workspace/status", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/summary", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/regions", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/read", room.CapRead, azCapOnly, azFixNone, read),
		rest("GET", "/workspace/history", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/participants", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/invites", room.CapInvite, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/diff", room.CapRead, azCapOnly, azFixNone, diff),
		rest("GET", "/workspace/changes_since", room.CapRead, azCapOnly, azFixNone, since),
		rest("GET", "/workspace/leases", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/proposals", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/proposal", room.CapRead, azCapOnly, azFixPending, proposal),
		rest("GET", "/workspace/diagnostics", room.CapRead, azCapOnly, azFixNone, nil),
		rest("GET", "/workspace/room", room.CapRead, azCapOnly, azFixNone, nil),
		stream(rest("GET", "/workspace/observe", room.CapObserve, azCapOnly, azFixNone, nil)),

		// ---- document writes ----
		rest("POST", "/workspace/checkout", room.CapCheckout, azCapOnly, azFixSection, target),
		rest("POST", "/workspace/renew", room.CapCheckout, azLeaseHolder, azFixLease, lease),
		rest("POST", "/workspace/release", room.CapCheckout, azLeaseHolderOrAdmin, azFixLease, lease),
		rest("POST", "/workspace/propose", room.CapPropose, azCapOnly, azFixNone, azProposeIn),
		rest("POST", "/workspace/proposal/review", room.CapApprove, azCapOnly, azFixPending, review),
		serial(named("POST /workspace/commit (proposal)", rest("POST", "/workspace/commit", room.CapCommit, azCapOnly, azFixApproved, commit))),
		serial(named("POST /workspace/commit (raw)", rest("POST", "/workspace/commit", room.CapAdmin, azCapOnly, azFixVersion, azRawCommitIn))),
		rest("POST", "/workspace/invite", room.CapInvite, azInviteGrant, azFixNone, invite),
		rest("POST", "/workspace/invite/revoke", room.CapInvite, azInviteCreator, azFixInvite, func(r *azRec) map[string]any {
			return map[string]any{"invite_id": r.InviteID}
		}),
		rest("POST", "/workspace/leave", "", azSessionOnly, azFixSession, none),
		named("POST /workspace/session/end (participant)", rest("POST", "/workspace/session/end", room.CapAdmin, azCapOnly, azFixVictim, func(r *azRec) map[string]any {
			return map[string]any{"participant_id": r.VictimPID}
		})),
		named("POST /workspace/session/end (session)", rest("POST", "/workspace/session/end", room.CapAdmin, azCapOnly, azFixVictim, func(r *azRec) map[string]any {
			return map[string]any{"session_ref": r.VictimRef}
		})),

		// ---- handoffs and tasks over HTTP ----
		rest("POST", "/workspace/handoff", room.CapPropose, azCapOnly, azFixNone, create),
		rest("GET", "/workspace/handoff", room.CapRead, azHandoffRead, azFixAccepted, hid),
		rest("GET", "/workspace/handoff/events", room.CapRead, azHandoffRead, azFixAccepted, hid),
		rest("POST", "/workspace/handoff/accept", room.CapCheckout, azHandoffAccept, azFixOpen, hid),
		rest("POST", "/workspace/handoff/request_input", room.CapCheckout, azHandoffAssignee, azFixAccepted, ask),
		rest("POST", "/workspace/handoff/complete", room.CapCheckout, azHandoffAssignee, azFixAccepted, done),
		rest("POST", "/workspace/handoff/approve", room.CapApprove, azHandoffDecide, azFixResult, hid),
		rest("POST", "/workspace/handoff/reject", room.CapApprove, azHandoffDecide, azFixResult, hid),
		rest("GET", "/workspace/task", "", azTaskRead, azFixAccepted, func(r *azRec) map[string]any {
			return map[string]any{"task_id": r.TaskID}
		}),
		rest("POST", "/workspace/task/update", "", azTaskOwner, azFixInput, func(r *azRec) map[string]any {
			return map[string]any{"task_id": r.TaskID, "input_responses": answer}
		}),
		rest("POST", "/workspace/task/cancel", "", azTaskOwner, azFixAccepted, func(r *azRec) map[string]any {
			return map[string]any{"task_id": r.TaskID}
		}),
		rest("POST", "/workspace/participant/cancel_handoffs", room.CapAdmin, azCapOnly, azFixFlooder, func(r *azRec) map[string]any {
			return map[string]any{"participant_id": r.Participant}
		}),

		// ---- the owner listener's own routes ----
		on(azOwnerOnly, rest("GET", "/debug/metrics", "", azOperatorBearer, azFixNone, nil)),
		on(azOwnerOnly, rest("GET", "/debug/pprof/heap", "", azOperatorBearer, azFixNone, nil)),
		on(azOwnerOnly, rest("POST", "/owner/key", "", azOperatorBearer, azFixNone, none)),

		// ---- MCP tools (toolCatalog) ----
		tool("workspace_status", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_summary", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_regions", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_read", room.CapRead, azCapOnly, azFixNone, read),
		tool("workspace_history", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_participants", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_invite", room.CapInvite, azInviteGrant, azFixNone, invite),
		tool("workspace_leave", "", azSessionOnly, azFixSession, none),
		tool("workspace_diff", room.CapRead, azCapOnly, azFixNone, diff),
		tool("workspace_changes_since", room.CapRead, azCapOnly, azFixNone, since),
		tool("workspace_leases", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_proposals", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_proposal", room.CapRead, azCapOnly, azFixPending, proposal),
		tool("workspace_diagnostics", room.CapRead, azCapOnly, azFixNone, none),
		tool("workspace_checkout", room.CapCheckout, azCapOnly, azFixSection, target),
		tool("workspace_renew", room.CapCheckout, azLeaseHolder, azFixLease, lease),
		tool("workspace_release", room.CapCheckout, azLeaseHolderOrAdmin, azFixLease, lease),
		tool("workspace_propose", room.CapPropose, azCapOnly, azFixNone, azProposeIn),
		tool("workspace_review", room.CapApprove, azCapOnly, azFixPending, review),
		serial(named("tool workspace_commit (proposal)", tool("workspace_commit", room.CapCommit, azCapOnly, azFixApproved, commit))),
		serial(named("tool workspace_commit (raw)", tool("workspace_commit", room.CapAdmin, azCapOnly, azFixVersion, azRawCommitIn))),
		tool("handoff_create", room.CapPropose, azCapOnly, azFixNone, create),
		tool("handoff_accept", room.CapCheckout, azHandoffAccept, azFixOpen, hid),
		tool("handoff_request_input", room.CapCheckout, azHandoffAssignee, azFixAccepted, ask),
		tool("handoff_complete", room.CapCheckout, azHandoffAssignee, azFixAccepted, done),
		tool("handoff_get", room.CapRead, azHandoffRead, azFixAccepted, hid),
		tool("handoff_events", room.CapRead, azHandoffRead, azFixAccepted, hid),
		tool("handoff_approve", room.CapApprove, azHandoffDecide, azFixResult, hid),
		tool("handoff_reject", room.CapApprove, azHandoffDecide, azFixResult, hid),

		// ---- MCP methods ----
		rpc("tasks/get", "", azTaskRead, azFixAccepted, func(r *azRec) map[string]any { return map[string]any{"taskId": r.TaskID} }),
		rpc("tasks/update", "", azTaskOwner, azFixInput, func(r *azRec) map[string]any {
			return map[string]any{"taskId": r.TaskID, "inputResponses": answer}
		}),
		rpc("tasks/cancel", "", azTaskOwner, azFixAccepted, func(r *azRec) map[string]any { return map[string]any{"taskId": r.TaskID} }),
		rpc("resources/read", room.CapRead, azCapOnly, azFixNone, func(r *azRec) map[string]any { return map[string]any{"uri": r.DocURI} }),
		rpc("resources/subscribe", room.CapRead, azCapOnly, azFixNone, func(r *azRec) map[string]any { return map[string]any{"uri": r.DocURI} }),
		{Name: "subscriptions/listen (taskIds)", Door: azListen, Method: "subscriptions/listen", Rule: azTaskListen,
			Fix: azFixAccepted, Serial: true, Stream: true},
	}
}

// ---- who calls ----

type azWhoKind int

const (
	azWSession        azWhoKind = iota // a live bearer session
	azWNone                            // no Authorization header
	azWBogus                           // a bearer that names no session
	azWExpired                         // a session past its expiry
	azWOperator                        // the operator token
	azWCookie                          // the owner-page cookie, with the page's own Origin
	azWCookieNoOrigin                  // the owner-page cookie without an Origin header
)

type azWho struct {
	Name  string
	Kind  azWhoKind
	Caps  []string // azWSession: the exact grant
	Token string
	PID   string
}

// azCapSets are the capability sets every operation is called with.
var azCapSets = []struct {
	Name string
	Caps []string
}{
	{"none", nil},
	{"read", []string{"read"}}, {"observe", []string{"observe"}}, {"propose", []string{"propose"}},
	{"checkout", []string{"checkout"}}, {"commit", []string{"commit"}}, {"approve", []string{"approve"}},
	{"invite", []string{"invite"}}, {"admin", []string{"admin"}},
	{"agent", azAgentCaps}, {"star", []string{"*"}},
}

// ---- the expected answer, from the spec ----

// azWant is what a case must answer. Allow with Code "" is a success; Allow
// with a Code is a call the rules let through that must end in that state
// error; otherwise Code is the exact refusal.
type azWant struct {
	Allow    bool
	Code     string
	Required string // permission_denied's required field; "" = must be absent
	Ack      bool   // listen: the task is acknowledged
}

func azCapsOf(names []string) room.Caps {
	c, err := room.ParseCaps(names)
	if err != nil {
		panic(err)
	}
	return c
}

// azAuth is the authentication step alone: "" when the credential passes at
// this door, else the error code.
func azAuth(op *azOp, w *azWho, l listener) string {
	switch op.Rule {
	case azPublic, azInvitation, azOwnerPage:
		return ""
	}
	mcp := op.Door != azREST || op.MCPAuth
	switch w.Kind {
	case azWNone, azWBogus:
		return "unauthorized"
	case azWExpired:
		return "session_expired"
	case azWOperator, azWCookie, azWCookieNoOrigin:
		// D15: /mcp takes sessions only; D23: the operator token and the
		// page cookie exist on the owner listener only.
		if mcp || l == ingressListener {
			return "unauthorized"
		}
	}
	return ""
}

// azExpect computes the answer from the rules of spec/domain.md §1.5, D1–D4,
// D12, D15, D17 and D23.
func azExpect(op *azOp, w *azWho, role azRole, l listener) azWant {
	allow := azWant{Allow: true}
	deny := func(code, required string) azWant { return azWant{Code: code, Required: required} }
	switch op.Rule {
	case azPublic, azInvitation:
		return allow
	case azOwnerPage:
		if w.Kind == azWCookie || w.Kind == azWCookieNoOrigin {
			return allow
		}
		return deny("owner_page", "")
	}
	if code := azAuth(op, w, l); code != "" {
		return deny(code, "")
	}
	trusted := w.Kind == azWOperator || w.Kind == azWCookie || w.Kind == azWCookieNoOrigin
	if w.Kind == azWCookieNoOrigin && op.Method != "GET" {
		return deny("permission_denied", "") // D23: cookie writes must name the page's own origin
	}
	caps := azCapsOf(w.Caps)
	has := func(c room.Capability) bool { return trusted || caps.Has(c) }
	admin := has(room.CapAdmin)
	switch op.Rule {
	case azTrustedOnly:
		if !trusted {
			return deny("permission_denied", "")
		}
		return allow
	case azOperatorBearer:
		if w.Kind != azWOperator {
			return deny("permission_denied", "")
		}
		return allow
	case azSessionOnly:
		if trusted { // the operator holds no session to end
			return azWant{Allow: true, Code: "invalid_request"}
		}
		return allow
	}
	if op.Cap != "" && !has(op.Cap) {
		return deny("permission_denied", string(op.Cap))
	}
	switch op.Rule {
	case azInviteGrant:
		if !admin && !has(room.CapRead) {
			return deny("permission_denied", string(room.CapRead)) // grants only what the inviter holds
		}
	case azLeaseHolder:
		if role != azOwner {
			return deny("permission_denied", "")
		}
	case azLeaseHolderOrAdmin:
		if role != azOwner && !admin {
			return deny("permission_denied", "")
		}
	case azInviteCreator:
		if role != azOwner && !admin {
			return deny("unauthorized", "") // someone else's answers as an unknown one
		}
	case azHandoffRead, azHandoffAccept, azHandoffAssignee, azHandoffDecide:
		party := role == azOwner || role == azAssignee
		visible := admin || party || has(room.CapApprove) || (role == azOpen && has(room.CapCheckout))
		if !visible {
			return deny("handoff_not_found", "")
		}
		switch op.Rule {
		case azHandoffAccept:
			if role == azOwner {
				return deny("permission_denied", "")
			}
			if role == azThird { // addressed to someone else
				return deny("handoff_conflict", "")
			}
		case azHandoffAssignee:
			if role != azAssignee {
				return deny("permission_denied", "")
			}
		case azHandoffDecide:
			if role == azAssignee {
				return deny("permission_denied", "")
			}
		}
	case azTaskRead, azTaskOwner, azTaskListen:
		visible := admin || role == azOwner || role == azAssignee
		switch op.Rule {
		case azTaskListen:
			return azWant{Allow: true, Ack: visible}
		case azTaskRead:
			if !visible {
				return deny("task_not_found", "")
			}
		case azTaskOwner:
			if !visible {
				return deny("task_not_found", "")
			}
			if role != azOwner && !admin {
				return deny("permission_denied", "")
			}
		}
	}
	return allow
}

// ---- the harness ----

type azMatrix struct {
	h       *roomHarness
	A, B    string // the other owner and the other assignee of third-party records
	cookie  *http.Cookie
	docURI  string
	dummy   azRec // records for cases refused before any lookup
	section atomic.Int64
	streams *http.Client
	run     atomic.Int64
}

type azCase struct {
	op   *azOp
	who  *azWho
	role azRole
	l    listener
	want azWant
}

func (c *azCase) name() string {
	l := "ingress"
	if c.l == ownerListener {
		l = "owner"
	}
	return fmt.Sprintf("%s|%s|%s|%s", l, c.op.Name, c.who.Name, c.role)
}

const azSections = 600

func (m *azMatrix) nextSection(t testing.TB) string {
	n := m.section.Add(1)
	if n >= azSections {
		t.Fatalf("out of sections (%d)", azSections)
	}
	return fmt.Sprintf("Part %04d", n)
}

func (m *azMatrix) version(t testing.TB) int64 {
	var v int64
	if err := m.h.Store.Reader.QueryRow(`SELECT max(version) FROM versions`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// handoff makes a handoff in the state fix asks for, with subject in role.
func (m *azMatrix) handoff(t testing.TB, r *azRec, subject string, role azRole, fix azFix) {
	h := m.h
	owner, assignee, requested := m.A, m.B, ""
	switch role {
	case azOwner:
		owner = subject
	case azAssignee:
		assignee = subject
	case azOpen:
		assignee = ""
	}
	if fix == azFixOpen {
		switch role {
		case azAssignee:
			requested, assignee = subject, ""
		case azThird:
			requested, assignee = m.B, ""
		default:
			assignee = ""
		}
	}
	res := azDo(t, h, func(tx *room.Tx) (room.CreateHandoffResult, error) {
		res, err := h.Eng.CreateHandoff(tx, azP(owner), room.CreateHandoffInput{Summary: "az fixture", Assignee: requested})
		if err != nil || assignee == "" {
			return res, err
		}
		id := res.Handoff.HandoffID
		if _, err := h.Eng.AcceptHandoff(tx, azP(assignee), room.HandoffIDInput{HandoffID: id}); err != nil {
			return res, err
		}
		switch fix {
		case azFixInput:
			_, err = h.Eng.RequestInput(tx, azP(assignee), room.RequestInputInput{HandoffID: id, Requests: []room.InputRequestSpec{{Key: "k", Message: "which?"}}})
		case azFixResult:
			_, err = h.Eng.CompleteHandoff(tx, azP(assignee), room.CompleteInput{HandoffID: id, Result: room.ResultInput{Text: "the result"}})
		}
		return res, err
	})
	r.HandoffID, r.TaskID = res.Handoff.HandoffID, res.Handoff.TaskID
}

// flooder is a new participant who created one live handoff, for the
// operations that act on a participant's records.
func (m *azMatrix) flooder(t testing.TB) string {
	g := azJoin(t, m.h, "flooder", azAgentCaps, 0)
	azDo(t, m.h, func(tx *room.Tx) (room.CreateHandoffResult, error) {
		return m.h.Eng.CreateHandoff(tx, azP(g.ParticipantID), room.CreateHandoffInput{Summary: "az flood"})
	})
	return g.ParticipantID
}

// fixture makes the case's records. Cases refused at authentication work on
// the shared dummy records: nothing may touch them.
func (m *azMatrix) fixture(t testing.TB, c *azCase) *azRec {
	h := m.h
	if azAuth(c.op, c.who, c.l) != "" || (c.who.Kind == azWCookieNoOrigin && c.op.Method != "GET") {
		r := m.dummy
		return &r
	}
	r := &azRec{DocURI: m.docURI}
	subject := c.who.PID
	switch c.op.Fix {
	case azFixOpen, azFixAccepted, azFixInput, azFixResult:
		m.handoff(t, r, subject, c.role, c.op.Fix)
	case azFixLease:
		holder := m.B
		if c.role == azOwner {
			holder = subject
		}
		section := m.nextSection(t)
		l := azDo(t, h, func(tx *room.Tx) (room.Lease, error) {
			return h.Eng.Checkout(tx, azP(holder), room.CheckoutInput{Target: section})
		})
		r.LeaseID = l.LeaseID
	case azFixPending, azFixApproved:
		p := azDo(t, h, func(tx *room.Tx) (room.Proposal, error) {
			base := int64(1)
			if c.op.Fix == azFixApproved {
				if err := tx.Querier().QueryRowContext(tx.Context(), `SELECT max(version) FROM versions`).Scan(&base); err != nil {
					return room.Proposal{}, err
				}
			}
			content := fmt.Sprintf("## Goals\n\nproposal %d\n\n", m.section.Add(0))
			p, err := h.Eng.Propose(tx, azP(m.A), room.ProposeInput{Target: "Goals", BaseVersion: base, Summary: "az",
				Change: room.ChangeInput{Content: &content, Section: "Goals"}})
			if err != nil || c.op.Fix == azFixPending {
				return p, err
			}
			yes := true
			_, err = h.Eng.Review(tx, azP(m.A), room.ReviewInput{ProposalID: p.ProposalID, Approve: &yes})
			return p, err
		})
		r.ProposalID = p.ProposalID
	case azFixInvite:
		creator := h.Eng.HostID
		switch c.role {
		case azOwner:
			creator = subject
		case azThird:
			creator = m.A
		}
		inv := azDo(t, h, func(tx *room.Tx) (room.InviteGrant, error) {
			return h.Eng.CreateInvite(tx, room.Principal{ParticipantID: creator, Caps: room.Caps{room.CapAll}},
				room.InviteInput{Capabilities: []string{"read"}})
		})
		r.InviteID, r.InviteToken = inv.InviteID, inv.Token
	case azFixVictim:
		g := azJoin(t, h, "victim", []string{"read"}, 0)
		r.VictimPID, r.VictimRef = g.ParticipantID, g.SessionRef
	case azFixSession:
		if c.who.Kind == azWSession {
			r.Token = azJoin(t, h, "leaver "+c.who.Name, c.who.Caps, 0).SessionToken
		}
	case azFixSection:
		r.Section = m.nextSection(t)
	case azFixVersion:
		r.Version = m.version(t)
	case azFixFlooder:
		r.Participant = m.flooder(t)
	}
	return r
}

// ---- calling, door by door ----

// azGot is an answer reduced to what the matrix compares.
type azGot struct {
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

func (g azGot) String() string {
	b := g.Raw
	if len(b) > 400 {
		b = b[:400]
	}
	return fmt.Sprintf("%d %s", g.Status, b)
}

func azRequired(m map[string]any) *string {
	if v, ok := m["required"]; ok {
		s := fmt.Sprint(v)
		return &s
	}
	return nil
}

// azRPCGot fills got from a JSON-RPC answer body.
func azRPCGot(got *azGot, body []byte) {
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
			got.Required = azRequired(m.Error.Data)
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
		got.Required = azRequired(sc)
		return
	}
	got.OK = got.Status == http.StatusOK
}

func (m *azMatrix) base(l listener) string {
	if l == ownerListener {
		return m.h.Owner.URL
	}
	return m.h.Ingress.URL
}

// credentials applies the caller's credential to a request.
func (m *azMatrix) credentials(c *azCase, rec *azRec, req *http.Request) {
	token := c.who.Token
	if c.op.Fix == azFixSession && rec.Token != "" {
		token = rec.Token
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch c.who.Kind {
	case azWCookie:
		req.AddCookie(m.cookie)
		req.Header.Set("Origin", m.base(c.l))
	case azWCookieNoOrigin:
		req.AddCookie(m.cookie)
	}
}

func (m *azMatrix) call(t *testing.T, c *azCase, rec *azRec) azGot {
	t.Helper()
	var in map[string]any
	if c.op.In != nil {
		in = c.op.In(rec)
	}
	var req *http.Request
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), lsWait)
	switch c.op.Door {
	case azREST:
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
	case azTool:
		req = azMCPRequest(ctx, t, m.base(c.l)+"/mcp", "7", "tools/call", map[string]any{"name": c.op.Method, "arguments": in}, false)
	case azRPC:
		req = azMCPRequest(ctx, t, m.base(c.l)+"/mcp", "7", c.op.Method, in, true)
	case azListen:
		req = azMCPRequest(ctx, t, m.base(c.l)+"/mcp", `"az"`, "subscriptions/listen",
			map[string]any{"notifications": map[string]any{"taskIds": []string{rec.TaskID}}}, true)
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m.credentials(c, rec, req)

	got := azGot{}
	if c.op.Stream {
		s, rep := lsOpen(t, m.streams, req, cancel, c.name())
		if s != nil {
			got.Status, got.OK = http.StatusOK, true
			if c.op.Door == azListen {
				s.id = `"az"`
				s.read()
				ack := s.ack(t)
				got.Ack = []string{}
				if raw, ok := ack["taskIds"]; ok {
					got.Ack = lsStrings(t, raw)
				}
			}
			s.close()
			azWaitSubscribers(t, m.h, 0)
			return got
		}
		got.Status, got.Raw = rep.Status, rep.Body
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
		if ct := res.Header.Get("Content-Type"); got.Status >= 400 && c.op.Rule != azOwnerPage && !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: error answer %d with Content-Type %q", c.name(), got.Status, ct)
		}
	}
	if c.op.Door != azREST || c.op.MCPAuth {
		azRPCGot(&got, got.Raw)
		return got
	}
	var body map[string]any
	if json.Unmarshal(got.Raw, &body) == nil {
		got.Code, _ = body["error"].(string)
		got.Required = azRequired(body)
	}
	got.OK = got.Status == c.op.okStatus() && got.Code == ""
	return got
}

var azHTTPStatus = map[string]int{
	"unauthorized": 401, "session_expired": 401, "permission_denied": 403, "handoff_not_found": 404,
	"task_not_found": 404, "handoff_conflict": 409, "invalid_request": 400, "owner_page": 401,
}

// azAuthzCodes are the answers that mean "not allowed".
var azAuthzCodes = []string{"unauthorized", "session_expired", "permission_denied", "handoff_not_found", "task_not_found"}

// check compares an answer with the expectation, at the case's door.
func (c *azCase) check(t *testing.T, got azGot) {
	t.Helper()
	want := c.want
	if want.Allow && want.Code == "" {
		if !got.OK {
			t.Errorf("%s: want allowed, got %s", c.name(), got)
			return
		}
		if c.op.Rule == azTaskListen {
			if acked := len(got.Ack) > 0; acked != want.Ack {
				t.Errorf("%s: acknowledged taskIds %v, want the task acknowledged = %v", c.name(), got.Ack, want.Ack)
			}
		}
		return
	}
	if want.Allow && slices.Contains(azAuthzCodes, got.Code) {
		t.Errorf("%s: allowed by the rules (ending in %s), got an authorization error: %s", c.name(), want.Code, got)
		return
	}
	code := want.Code
	switch {
	case c.op.Rule == azOwnerPage:
		if got.Status != azHTTPStatus[code] {
			t.Errorf("%s: want %d, got %s", c.name(), azHTTPStatus[code], got)
		}
		return
	case c.op.Door == azREST && !c.op.MCPAuth:
		if got.Status != azHTTPStatus[code] || got.Code != code {
			t.Errorf("%s: want %d %s, got %s", c.name(), azHTTPStatus[code], code, got)
			return
		}
	case code == "unauthorized" || code == "session_expired":
		if got.Status != 401 || got.RPC != codeUnauthorized || got.Code != code {
			t.Errorf("%s: want 401 JSON-RPC %d data.error %s, got %s", c.name(), codeUnauthorized, code, got)
			return
		}
	case code == "task_not_found":
		if got.Status != 200 || got.RPC != codeInvalidParams || got.Message != "unknown task" {
			t.Errorf("%s: want JSON-RPC -32602 \"unknown task\", got %s", c.name(), got)
			return
		}
	case c.op.Door == azTool:
		if got.Status != 200 || !got.IsError || got.Code != code {
			t.Errorf("%s: want an isError result with error %s, got %s", c.name(), code, got)
			return
		}
	default:
		if got.Status != 200 || got.RPC != codePermissionDenied || got.Code != code {
			t.Errorf("%s: want JSON-RPC %d data.error %s, got %s", c.name(), codePermissionDenied, code, got)
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
	h := lsHarness(t, azDoc(azSections), lsOpts{
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
	m := &azMatrix{h: h, docURI: h.Eng.DocumentURI(), streams: lsClient()}
	m.A = azJoin(t, h, "other owner", append(slices.Clone(azAgentCaps), "approve"), 0).ParticipantID
	m.B = azJoin(t, h, "other assignee", azAgentCaps, 0).ParticipantID
	_, m.cookie = azOwnerCookie(t, h)

	// The callers.
	var subjects []*azWho
	for _, cs := range azCapSets {
		g := azJoin(t, h, "subject "+cs.Name, cs.Caps, 0)
		subjects = append(subjects, &azWho{Name: cs.Name, Kind: azWSession, Caps: cs.Caps, Token: g.SessionToken, PID: g.ParticipantID})
	}
	subject := func(name string) *azWho {
		for _, s := range subjects {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no subject %s", name)
		return nil
	}
	expired := azJoin(t, h, "expired", azAgentCaps, 1)
	h.Clock.Advance(2 * time.Minute) // that session is over, no other is
	host := h.Eng.HostID
	noSession := &azWho{Name: "no-session", Kind: azWNone}
	bogus := &azWho{Name: "unknown-token", Kind: azWBogus, Token: azRandomID("ses")}
	exp := &azWho{Name: "expired", Kind: azWExpired, Caps: azAgentCaps, Token: expired.SessionToken, PID: expired.ParticipantID}
	operator := &azWho{Name: "operator-token", Kind: azWOperator, Token: h.OpToken, PID: host}
	cookie := &azWho{Name: "owner-cookie", Kind: azWCookie, PID: host}
	cookieNoOrigin := &azWho{Name: "owner-cookie-no-origin", Kind: azWCookieNoOrigin, PID: host}
	callers := map[listener][]*azWho{
		ingressListener: append(slices.Clone(subjects), noSession, bogus, exp, operator, cookie),
		ownerListener:   {operator, cookie, cookieNoOrigin, noSession, exp, subject("star"), subject("agent")},
	}

	// Records for cases refused before any lookup.
	m.handoff(t, &m.dummy, m.A, azThird, azFixInput)
	m.dummy.DocURI = m.docURI
	dl := azDo(t, h, func(tx *room.Tx) (room.Lease, error) {
		return h.Eng.Checkout(tx, azP(m.B), room.CheckoutInput{Target: "Plan"})
	})
	m.dummy.LeaseID, m.dummy.Section, m.dummy.Version = dl.LeaseID, "Plan", 1
	inv := azInvite(t, h, "read")
	m.dummy.InviteID, m.dummy.InviteToken = inv.InviteID, inv.Token
	dp := azDo(t, h, func(tx *room.Tx) (room.Proposal, error) {
		c := "## Goals\n\ndummy\n\n"
		return h.Eng.Propose(tx, azP(m.A), room.ProposeInput{Target: "Goals", BaseVersion: 1, Summary: "dummy",
			Change: room.ChangeInput{Content: &c, Section: "Goals"}})
	})
	m.dummy.ProposalID = dp.ProposalID
	m.dummy.Participant = m.flooder(t)

	ops := azOps()

	t.Run("the table covers every route, every tool, and agrees with the discovery table", func(t *testing.T) {
		for _, l := range []struct {
			l       listener
			name    string
			handler http.Handler
		}{{ingressListener, "ingress", h.API.IngressHandler()}, {ownerListener, "owner", h.API.OwnerHandler()}} {
			for _, rt := range azRoutes(t, l.handler) {
				if rt == (azRoute{"POST", "/mcp"}) {
					continue // the MCP rows
				}
				found := false
				for _, op := range ops {
					if op.Door == azREST && op.Method == rt.Method && azPathMatches(rt.Path, op.Path) && azServes(op, l.l) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s listener route %s has no row in the authorization table", l.name, rt)
				}
			}
		}
		for _, tl := range toolCatalog() {
			if !slices.ContainsFunc(ops, func(op *azOp) bool { return op.Door == azTool && op.Method == tl.Name }) {
				t.Errorf("tool %s has no row in the authorization table", tl.Name)
			}
		}
		for _, op := range ops {
			if op.Door != azREST || op.Cap == "" {
				continue
			}
			for _, d := range operations {
				if d.HTTP == op.Method+" "+op.Path && !strings.Contains(d.Capability, string(op.Cap)) {
					t.Errorf("%s: the discovery table says %q, the rules say %s", op.Name, d.Capability, op.Cap)
				}
			}
		}
	})

	t.Run("unknown and foreign ids are indistinguishable", func(t *testing.T) {
		azIndistinguishable(t, m, subject("agent"))
	})

	// The matrix. Serial cases (version commits, streams) run first, in
	// order; the rest run in parallel once the loop has queued them.
	var cases []*azCase
	for _, l := range []listener{ingressListener, ownerListener} {
		for _, op := range ops {
			if !azServes(op, l) {
				continue
			}
			for _, w := range callers[l] {
				roles := op.roles()
				if azAuth(op, w, l) != "" {
					roles = []azRole{azNoRole}
				}
				for _, role := range roles {
					if op.Rule == azHandoffAccept && role == azAssignee && w.Kind == azWSession && !azCapsOf(w.Caps).Has(room.CapCheckout) {
						continue // a handoff cannot be addressed to a participant without checkout (D3)
					}
					c := &azCase{op: op, who: w, role: role, l: l}
					c.want = azExpect(op, w, role, l)
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

func azServes(op *azOp, l listener) bool {
	switch op.On {
	case azIngressOnly:
		return l == ingressListener
	case azOwnerOnly:
		return l == ownerListener
	}
	return true
}

// azIndistinguishable: a task (or handoff) id that names nothing and one
// that names a record the caller may not see get byte-identical answers
// (once the id itself, which the answer echoes, is blanked), on every
// surface, and the foreign record is untouched.
func azIndistinguishable(t *testing.T, m *azMatrix, who *azWho) {
	h := m.h
	var foreign azRec
	m.handoff(t, &foreign, m.A, azThird, azFixInput) // owner A, assignee B: who is no party
	unknownTask, unknownHandoff := azRandomID("task"), azRandomID("handoff")
	h.sweep() // flush last_seen now, so the snapshot compares only what the calls could change
	before := h.snapshot()
	mcp := mcpClient(h, who.Token, true)
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
			r := mcp.do(t, mtReq{ID: 41, Method: method, Params: params})
			return r.Status, string(r.Raw)
		}})
	}
	rest := func(name, method, path string, body func(id string) any) {
		surfaces = append(surfaces, struct {
			name string
			ask  func(id string) (int, string)
		}{name, func(id string) (int, string) {
			u := h.ingressURL(path)
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
			r := mcp.do(t, mtReq{ID: 42, Method: "tools/call", Params: map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": id}}})
			hr := h.do("GET", h.ingressURL("/workspace/handoff?handoff_id="+url.QueryEscape(id)), who.Token, nil)
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
	t.Run("the foreign records did not change", func(t *testing.T) {
		h.assertUnchanged(t, before)
	})
}

// azPathMatches reports whether a concrete path is served by a chi route
// pattern (exact, or under a trailing /* wildcard).
func azPathMatches(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == path
}
