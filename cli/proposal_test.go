package cli

// `ce proposals` pages and `ce proposal ID` shows one proposal with its
// text, with the real binary, against a room started with the pending caps
// as `ce serve` flags (issue 13, item 9).

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestProposalCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte(readsDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, "serve", file, "--json", "--pending-proposals", "3", "--pending-proposals-per-participant", "2")
	agent := func(name string) joinGrant {
		var inv inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--capabilities", "read,propose", "--json"), &inv)
		return join(t, dir, inv.URI, name)
	}
	a, b := agent("a"), agent("b")
	text := func(i int) string { return "## Risks\n\nrisk number " + strings.Repeat("é", i+1) + "\n" }
	propose := func(g joinGrant, i int) (int, map[string]any) {
		code, body := httpDo(t, "POST", srv.Banner.IngressURL+"/workspace/propose", g.SessionToken, map[string]any{
			"target": "Risks", "base_version": 1, "summary": "risk", "change": map[string]any{"section": "Risks", "content": text(i)}})
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("propose answer: %s", body)
		}
		return code, m
	}
	var ids []string // newest first
	for i, g := range []joinGrant{a, a, b} {
		code, m := propose(g, i)
		if code != http.StatusOK {
			t.Fatalf("proposal %d: %d %v", i, code, m)
		}
		ids = append([]string{m["proposal_id"].(string)}, ids...)
	}
	list := func(t *testing.T, args ...string) readsProposals {
		t.Helper()
		var page readsProposals
		decodeJSON(t, mustCE(t, dir, nil, append([]string{"proposals", "--workspace", file, "--json"}, args...)...), &page)
		return page
	}

	t.Run("the serve flags cap pending proposals; a refusal stores nothing", func(t *testing.T) {
		code, m := propose(a, 7)
		if code != http.StatusTooManyRequests || m["error"] != "limit_exceeded" || m["scope"] != "participant" || m["limit"] != float64(2) {
			t.Fatalf("a's third: %d %v", code, m)
		}
		c := agent("c")
		code, m = propose(c, 8)
		if code != http.StatusTooManyRequests || m["scope"] != "room" || m["limit"] != float64(3) || m["pending"] != float64(3) {
			t.Fatalf("c's first: %d %v", code, m)
		}
		if got := list(t); len(got.Proposals) != 3 {
			t.Fatalf("%d proposals stored, want 3", len(got.Proposals))
		}
	})
	t.Run("proposals pages with --limit and --cursor, newest first, without text", func(t *testing.T) {
		first := list(t, "--limit", "2")
		if len(first.Proposals) != 2 || first.NextCursor == "" {
			t.Fatalf("first page: %+v", first)
		}
		rest := list(t, "--limit", "2", "--cursor", first.NextCursor)
		if len(rest.Proposals) != 1 || rest.NextCursor != "" {
			t.Fatalf("second page: %+v", rest)
		}
		var got []string
		for _, p := range append(first.Proposals, rest.Proposals...) {
			got = append(got, p["proposal_id"].(string))
			ch, _ := p["change"].(map[string]any)
			if _, has := ch["content"]; has || ch["content_bytes"] == nil {
				t.Errorf("listed change %v: want content_bytes and no content", ch)
			}
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("walked %v, want %v", got, ids)
		}
		out := mustCE(t, dir, nil, "proposals", "--workspace", file, "--limit", "2").stdout
		if !strings.Contains(out, "more: ce proposals --cursor "+first.NextCursor) || strings.Contains(out, "risk number") ||
			!strings.Contains(out, "SIZE") {
			t.Errorf("ce proposals --limit 2 text:\n%s", out)
		}
	})
	t.Run("proposal ID shows the text", func(t *testing.T) {
		out := mustCE(t, dir, nil, "proposal", ids[2], "--workspace", file).stdout
		if !strings.Contains(out, text(0)) || !strings.Contains(out, ids[2]) || !strings.Contains(out, "pending") {
			t.Errorf("ce proposal text:\n%s", out)
		}
		var p map[string]any
		decodeJSON(t, mustCE(t, dir, nil, "proposal", ids[0], "--workspace", file, "--json"), &p)
		if ch, _ := p["change"].(map[string]any); ch["content"] != text(2) || p["proposal_id"] != ids[0] {
			t.Errorf("ce proposal --json = %v", p)
		}
	})
	issued := list(t, "--limit", "1").NextCursor
	bad := []struct {
		name string
		args []string
		code int
		says string
	}{
		{"proposal without an id is a usage error", []string{"proposal", "--workspace", file}, exitUsage, "PROPOSAL_ID"},
		{"proposal with two ids is a usage error", []string{"proposal", ids[0], ids[1], "--workspace", file}, exitUsage, "PROPOSAL_ID"},
		{"an unknown proposal exits 4", []string{"proposal", "proposal_0123456789abcdef", "--workspace", file}, exitNotFound, "proposal_not_found"},
		{"an oversize id exits 4 without the echo", []string{"proposal", strings.Repeat("p", 20000), "--workspace", file}, exitNotFound, "proposal_not_found"},
		{"a forged cursor is a usage error", []string{"proposals", "--workspace", file, "--cursor", "cDEAAHByb3Bvc2FsXzAwMDAwMDAwMDAwMDAwMDA"}, exitUsage, "cursor"},
		{"a cursor from another filter is a usage error", []string{"proposals", "--workspace", file, "--status", "approved", "--cursor", issued}, exitUsage, "another status filter"},
		{"a negative limit is a usage error", []string{"proposals", "--workspace", file, "--limit", "-1"}, exitUsage, "limit"},
		{"proposals with an argument is a usage error", []string{"proposals", "--workspace", file, ids[0]}, exitUsage, "ce proposal ID"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			res := ce(t, dir, nil, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.says) {
				t.Errorf("exit %d, want %d mentioning %q: %.500s", res.code, tc.code, tc.says, res.output())
			}
			if len(res.output()) > 2048 {
				t.Errorf("%d bytes of output: the input is echoed", len(res.output()))
			}
		})
	}
	if code := srv.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("ce serve exited %d", code)
	}
	t.Run("stopped: proposal ID still reads the sidecar", func(t *testing.T) {
		if out := mustCE(t, dir, nil, "proposal", ids[1], "--workspace", file).stdout; !strings.Contains(out, text(1)) {
			t.Errorf("ce proposal text:\n%s", out)
		}
	})
	t.Run("serve refuses caps below 1", func(t *testing.T) {
		for _, flag := range []string{"--pending-proposals", "--pending-proposals-per-participant"} {
			res := ce(t, dir, nil, "serve", file, "--json", flag, "0")
			if res.code != exitUsage || !strings.Contains(res.stderr, flag) {
				t.Errorf("%s 0: exit %d: %s", flag, res.code, res.output())
			}
		}
	})
}
