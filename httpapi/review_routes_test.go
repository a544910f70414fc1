package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestReviewRoutes: the page's review reads over plain HTTP — a proposal's
// diff, a version with its diff, what waits — answer, and bad queries get
// the error body and change nothing.
func TestReviewRoutes(t *testing.T) {
	h := newHarness(t, "# Doc\n\n## A\n\none\n")
	a := h.join("a")
	var prop struct {
		ProposalID string `json:"proposal_id"`
	}
	h.Do(t, "POST", h.IngressURL("/workspace/propose"), a.SessionToken, map[string]any{"target": "A", "base_version": 1,
		"summary": "two", "change": map[string]any{"section": "A", "content": "## A\n\ntwo\n"}}).Into(t, &prop)

	var diff struct {
		Diff    string `json:"diff"`
		Added   int    `json:"added"`
		Removed int    `json:"removed"`
		Stale   bool   `json:"stale"`
	}
	r := h.Do(t, "GET", h.IngressURL("/workspace/proposal/diff?proposal_id="+prop.ProposalID), a.SessionToken, nil)
	wantOK(t, r)
	r.Into(t, &diff)
	if diff.Added != 1 || diff.Removed != 1 || diff.Stale || !strings.Contains(diff.Diff, "+two\n") {
		t.Fatalf("diff = %+v", diff)
	}
	var step struct {
		Version int64  `json:"version"`
		Latest  int64  `json:"latest"`
		Diff    string `json:"diff"`
	}
	r = h.Do(t, "GET", h.IngressURL("/workspace/version?version=1"), a.SessionToken, nil)
	wantOK(t, r)
	r.Into(t, &step)
	if step.Version != 1 || step.Latest != 1 || !strings.Contains(step.Diff, "+# Doc\n") {
		t.Fatalf("version = %+v", step)
	}
	var w struct {
		Count     int `json:"count"`
		Proposals int `json:"proposals"`
	}
	r = h.Do(t, "GET", h.OwnerURL("/workspace/waiting"), harnessOperatorToken, nil)
	wantOK(t, r)
	r.Into(t, &w)
	if w.Count != 1 || w.Proposals != 1 {
		t.Fatalf("waiting = %+v", w)
	}

	before := h.Snapshot()
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"diff_without_an_id_is_400", "/workspace/proposal/diff", http.StatusBadRequest, "invalid_request"},
		{"diff_of_an_unknown_id_is_404", "/workspace/proposal/diff?proposal_id=proposal_0000000000000000", http.StatusNotFound, "proposal_not_found"},
		{"version_not_a_number_is_400", "/workspace/version?version=two", http.StatusBadRequest, "invalid_request"},
		{"version_missing_is_400", "/workspace/version", http.StatusBadRequest, "invalid_request"},
		{"version_in_the_future_is_404", "/workspace/version?version=99", http.StatusNotFound, "version_not_found"},
		{"version_overflowing_is_400", "/workspace/version?version=99999999999999999999", http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.Do(t, "GET", h.IngressURL(tc.path), a.SessionToken, nil), tc.status, tc.code)
		})
	}
	h.AssertUnchanged(t, before)
}
