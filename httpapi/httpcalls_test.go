package httpapi

// Plain HTTP calls the document tests make over and over: POST and GET on
// the ingress listener as a session, the operator's POST on the owner
// listener, and the document workflow (checkout, propose, review, commit)
// each as one call that must succeed; plus the usual cast of a document
// room and a few reads of the sidecar.

import (
	"os"
	"testing"
)

// regionGoals is the Goals region of harnessDoc, heading line through the
// end of the region (the blank line before the next heading included).
const regionGoals = "## Goals\n\nship it\nsoon\n\n"

// regionPlan is the Plan region of harnessDoc (it ends the file).
const regionPlan = "## Plan\n\nstep one\nstep two\nstep three\n"

// castRoom is a harness with the usual cast of sessions.
type castRoom struct {
	h        *roomHarness
	author   party // the agent default: read, observe, propose, checkout, commit
	other    party // a second agent with the same grant
	reviewer party // read, approve
	reader   party // read only
}

func newCastRoom(t *testing.T) *castRoom {
	t.Helper()
	h := newHarness(t, "")
	return &castRoom{h: h,
		author:   h.join("author", agentCaps...),
		other:    h.join("other", agentCaps...),
		reviewer: h.join("reviewer", "read", "approve"),
		reader:   h.join("reader", "read"),
	}
}

// post sends a JSON body to path on the ingress listener as token.
func (h *roomHarness) post(t testing.TB, token, path string, body any) apiResp {
	t.Helper()
	return h.Do(t, "POST", h.IngressURL(path), token, body)
}

// get reads path (with its query) on the ingress listener as token.
func (h *roomHarness) get(t testing.TB, token, path string) apiResp {
	t.Helper()
	return h.Do(t, "GET", h.IngressURL(path), token, nil)
}

// operator posts to the owner listener with the operator credential.
func (h *roomHarness) operator(t testing.TB, path string, body any) apiResp {
	t.Helper()
	return h.Do(t, "POST", h.OwnerURL(path), h.OpToken, body)
}

// okJSON requires a 200 JSON object and returns it.
func okJSON(t testing.TB, r apiResp) map[string]any {
	t.Helper()
	wantOK(t, r)
	return r.JSON(t)
}

// okList requires a 200 JSON array of objects and returns it.
func okList(t testing.TB, r apiResp) []map[string]any {
	t.Helper()
	wantOK(t, r)
	var out []map[string]any
	r.Into(t, &out)
	return out
}

// checkout leases target for token and returns the lease.
func (h *roomHarness) checkout(t testing.TB, token, target string) map[string]any {
	t.Helper()
	return okJSON(t, h.post(t, token, "/workspace/checkout", map[string]any{"target": target}))
}

// proposeBody is a proposal replacing section (a selector; "" for the
// whole document) with content against base.
func proposeBody(base int64, section, content string) map[string]any {
	target := section
	if target == "" {
		target = "workspace"
	}
	change := map[string]any{"content": content}
	if section != "" {
		change["section"] = section
	}
	return map[string]any{"target": target, "base_version": base, "summary": "rewrite " + target, "change": change}
}

// propose proposes and returns the proposal.
func (h *roomHarness) propose(t testing.TB, token string, base int64, section, content string) map[string]any {
	t.Helper()
	return okJSON(t, h.post(t, token, "/workspace/propose", proposeBody(base, section, content)))
}

// review reviews a proposal and returns the answer.
func (h *roomHarness) review(t testing.TB, token, proposalID string, approve bool) map[string]any {
	t.Helper()
	return okJSON(t, h.post(t, token, "/workspace/proposal/review", map[string]any{"proposal_id": proposalID, "approve": approve}))
}

// approved proposes as proposer and approves as reviewer; it returns the
// proposal id.
func (h *roomHarness) approved(t testing.TB, proposer, reviewer string, base int64, section, content string) string {
	t.Helper()
	id := str(h.propose(t, proposer, base, section, content)["proposal_id"])
	if id == "" {
		t.Fatal("propose answered no proposal_id")
	}
	if got := h.review(t, reviewer, id, true); got["status"] != "approved" {
		t.Fatalf("review: %v", got)
	}
	return id
}

// commit commits a proposal as token.
func (h *roomHarness) commit(t testing.TB, token, proposalID string) apiResp {
	t.Helper()
	return h.post(t, token, "/workspace/commit", map[string]any{"proposal_id": proposalID})
}

// newestVersion is the newest version in the sidecar.
func (h *roomHarness) newestVersion(t testing.TB) int64 {
	t.Helper()
	return int64(h.Count(`SELECT max(version) FROM versions`))
}

// fileText is the document's text on disk.
func (h *roomHarness) fileText(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(h.Doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// maxEvent is the newest event id in the sidecar (0 when empty).
func (h *roomHarness) maxEvent(t testing.TB) int64 {
	t.Helper()
	return int64(h.Count(`SELECT coalesce(max(event_id), 0) FROM events`))
}
