package cli

// A participant's page from the command line (issue 28), with the real
// binary: `ce join` prints a Page: link (and page_url in --json) that opens
// the session's page once, over the local forward when holding one; `ce
// page` mints a fresh link from CE_SESSION or --token-file, never argv.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openPage follows a page link as a browser would, without redirects:
// status, and the cookie set (nil when none).
func openPage(t *testing.T, link string) (int, *http.Cookie) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(context.Background(), "GET", link, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", link, err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if strings.HasPrefix(ck.Name, "commonroom_page_") {
			return res.StatusCode, ck
		}
	}
	return res.StatusCode, nil
}

func TestJoinPrintsPageLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")

	var token, ingress string
	t.Run("json_page_url_opens_the_page_once", func(t *testing.T) {
		r := mustCE(t, dir, nil, "join", s.Banner.Invite, "--name", "ann", "--kind", "human", "--json")
		var out map[string]any
		decodeJSON(t, r, &out)
		link, _ := out["page_url"].(string)
		ingress = s.Banner.IngressURL
		if !strings.HasPrefix(link, ingress+"/?key=") {
			t.Fatalf("page_url %q, want %s/?key=…", link, ingress)
		}
		token, _ = out["session_token"].(string)
		if strings.Contains(link, token) {
			t.Fatalf("the page link carries the session token")
		}
		code, ck := openPage(t, link)
		if code != http.StatusSeeOther || ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Fatalf("first open: %d, cookie %+v", code, ck)
		}
		if code, ck := openPage(t, link); code != http.StatusForbidden || ck != nil {
			t.Errorf("second open: %d, cookie %v", code, ck)
		}
	})
	t.Run("text_output_has_a_Page_line", func(t *testing.T) {
		var ig inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json"), &ig)
		r := mustCE(t, dir, nil, "join", ig.URI, "--name", "bo")
		var link string
		for _, line := range strings.Split(r.stdout, "\n") {
			if rest, ok := strings.CutPrefix(line, "Page:"); ok {
				link, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
			}
		}
		if !strings.HasPrefix(link, s.Banner.IngressURL+"/?key=") {
			t.Fatalf("no Page: line with the ingress link:\n%s", r.stdout)
		}
		if code, _ := openPage(t, link); code != http.StatusSeeOther {
			t.Errorf("open: %d", code)
		}
	})
	if token == "" {
		t.Fatal("no session from the first subtest")
	}
	t.Run("ce_page_from_CE_SESSION_mints_a_fresh_link", func(t *testing.T) {
		r := mustCE(t, dir, []string{"CE_SESSION=" + token}, "page", "--url", ingress, "--json")
		var out map[string]any
		decodeJSON(t, r, &out)
		link, _ := out["page_url"].(string)
		if code, ck := openPage(t, link); code != http.StatusSeeOther || ck == nil {
			t.Errorf("open %q: %d", link, code)
		}
		if strings.Contains(r.output(), token) {
			t.Errorf("ce page printed the token")
		}
	})
	t.Run("ce_page_from_a_token_file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := mustCE(t, dir, nil, "page", "--url", ingress, "--token-file", f)
		if !strings.HasPrefix(r.stdout, "Page:    "+ingress+"/?key=") {
			t.Fatalf("stdout %q", r.stdout)
		}
		link := strings.Fields(strings.TrimPrefix(r.stdout, "Page:"))[0]
		if code, ck := openPage(t, link); code != http.StatusSeeOther || ck == nil {
			t.Errorf("open %q: %d", link, code)
		}
	})
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"no_token_is_a_usage_error", nil, []string{"page", "--url", ingress}},
		{"a_token_on_the_command_line_is_a_usage_error", nil, []string{"page", "--url", ingress, token}},
		{"no_url_is_a_usage_error", []string{"CE_SESSION=" + token}, []string{"page"}},
		{"a_url_with_a_path_is_a_usage_error", []string{"CE_SESSION=" + token}, []string{"page", "--url", ingress + "/workspace"}},
		{"a_missing_token_file_is_a_usage_error", nil, []string{"page", "--url", ingress, "--token-file", filepath.Join(dir, "nope")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, tc.env, tc.args...)
			if r.code != exitUsage || strings.Contains(r.stdout, "?key=") {
				t.Errorf("exit %d, want %d\n%s", r.code, exitUsage, r.output())
			}
			if strings.Contains(r.stderr, token) {
				t.Errorf("the token was echoed: %s", r.stderr)
			}
		})
	}
	t.Run("ce_page_after_the_session_left_is_refused", func(t *testing.T) {
		if code, body := httpDo(t, "POST", ingress+"/workspace/leave", token, nil); code != http.StatusOK {
			t.Fatalf("leave: %d %s", code, body)
		}
		r := ce(t, dir, []string{"CE_SESSION=" + token}, "page", "--url", ingress)
		if r.code != exitAuth || strings.Contains(r.stdout, "?key=") {
			t.Errorf("exit %d, want %d\n%s", r.code, exitAuth, r.output())
		}
	})
}

func TestJoinHoldPageLinkUsesTheForward(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "idea.md", "--json")
	h := startHeldJoin(t, dir, nil, s.Banner.Invite, "--name", "held", "--hold")
	local, _ := h.out["local_url"].(string)
	link, _ := h.out["page_url"].(string)
	if local == "" || !strings.HasPrefix(link, local+"/?key=") {
		t.Fatalf("page_url %q, local_url %q", link, local)
	}
	if code, ck := openPage(t, link); code != http.StatusSeeOther || ck == nil {
		t.Errorf("open over the forward: %d", code)
	}
	if code := h.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
}
