package cli

// The document's directory moves under a serving `ce serve` (issue 25
// item 5), with the real binary: `mv dir dir.old`, then nothing, a new
// directory or a symlink to another place where it was. Every request
// answers correctly from the room's own sidecar or with a clear
// unavailable; nothing is created anywhere (no new sidecar beside a new
// directory); the directory moved back works again without a restart, with
// the edit made meanwhile recorded, the history intact and the next commit
// in the right file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// dirNames lists dir's entries, sorted; "(missing)" when it does not exist.
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return "(missing)"
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func TestServeDocumentDirectoryMoves(t *testing.T) {
	const stranger = "# Someone else's notes\n"
	cases := []struct {
		name string
		put  func(t *testing.T, dir, elsewhere string)
	}{
		{"nothing in its place", func(*testing.T, string, string) {}},
		{"a new directory in its place", func(t *testing.T, dir, _ string) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink to another directory in its place", func(t *testing.T, dir, elsewhere string) {
			if err := os.Symlink(elsewhere, dir); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name+": reads answer from the room's sidecar, writes answer unavailable, nothing is created, and it resumes when moved back", func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir, elsewhere := filepath.Join(base, "dir"), filepath.Join(base, "elsewhere")
			for _, d := range []string{dir, elsewhere} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte(readsDoc), 0o644); err != nil {
				t.Fatal(err)
			}
			// A namesake in the other place: never read, never written.
			if err := os.WriteFile(filepath.Join(elsewhere, "notes.md"), []byte(stranger), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, base, "serve", "dir/notes.md", "--json", "--rate-limit", "0")
			var inv inviteGrant
			decodeJSON(t, mustCE(t, base, nil, "invite", "--workspace", file, "--capabilities", "read,observe,checkout,propose,approve,commit", "--json"), &inv)
			agent := join(t, base, inv.URI, "editor-agent")
			url := func(path string) string { return s.Banner.IngressURL + path }
			call := func(method, path string, body any) (int, map[string]any) {
				t.Helper()
				code, b := httpDo(t, method, url(path), agent.SessionToken, body)
				var m map[string]any
				json.Unmarshal(b, &m)
				return code, m
			}
			ok := func(method, path string, body any) map[string]any {
				t.Helper()
				code, m := call(method, path, body)
				if code != http.StatusOK {
					t.Fatalf("%s %s: %d %v", method, path, code, m)
				}
				return m
			}
			propose := func(base int, content string) string {
				t.Helper()
				p := ok("POST", "/workspace/propose", map[string]any{"target": "Risks", "base_version": base, "summary": "risks",
					"change": map[string]any{"section": "Risks", "content": content}})
				id, _ := p["proposal_id"].(string)
				ok("POST", "/workspace/proposal/review", map[string]any{"proposal_id": id, "approve": true})
				return id
			}
			approved := propose(1, "## Risks\n\napproved before the move\n")

			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			c.put(t, dir, elsewhere)

			// Reads, many at once (so the read pool opens connections after
			// the move): the room's own answer, never a 500, never an
			// empty sidecar's.
			// A client of its own: the connections it dials for the burst
			// and never uses would otherwise hold ce serve's graceful
			// stop for net/http's 5 s grace for new connections.
			burst := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			defer burst.CloseIdleConnections()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var bad []string
			for i := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					path := []string{"/workspace/status", "/workspace/read", "/workspace/changes_since?version=0", "/workspace/handoffs"}[i%4]
					r, err := mcptest.Do(context.Background(), burst, "GET", url(path), agent.SessionToken, nil)
					if err != nil {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("GET %s: %v", path, err))
						mu.Unlock()
						return
					}
					code, b := r.Status, r.Raw
					var m map[string]any
					json.Unmarshal(b, &m)
					// The room's own answer: its workspace at version 1 (the
					// handoff list names no workspace; it must be a list).
					_, list := m["handoffs"].([]any)
					good := code == http.StatusOK && (m["workspace_id"] == s.Banner.WorkspaceID || list)
					for _, k := range []string{"version", "to_version"} {
						if v, has := m[k]; has && v != float64(1) {
							good = false
						}
					}
					if code == http.StatusServiceUnavailable && m["error"] == "unavailable" && strings.Contains(fmt.Sprint(m["message"]), "moved or replaced") {
						good = true
					}
					if !good {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("GET %s: %d %s", path, code, b))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			burst.CloseIdleConnections()
			if len(bad) > 0 {
				t.Fatalf("%d of 64 reads while the directory was away answered neither the room's data nor a clear unavailable, e.g.\n%s", len(bad), bad[0])
			}
			if m := ok("GET", "/workspace/read", nil); m["content"] != readsDoc {
				t.Fatalf("a read while away: %v, want the document as the room last recorded it", m)
			}

			// What needs the file answers unavailable, saying why and what to do.
			for _, w := range []struct {
				path string
				body any
			}{
				{"/workspace/commit", map[string]any{"proposal_id": approved}},
				{"/workspace/propose", map[string]any{"target": "Plan", "base_version": 1, "summary": "plan",
					"change": map[string]any{"section": "Plan", "content": "## Plan\n\nwhile away\n"}}},
				{"/workspace/checkout", map[string]any{"target": "Plan"}},
			} {
				code, m := call("POST", w.path, w.body)
				msg := fmt.Sprint(m["message"])
				if code != http.StatusServiceUnavailable || m["error"] != "unavailable" ||
					!strings.Contains(msg, "notes.md") || !strings.Contains(msg, "moved or replaced") || !strings.Contains(msg, "Move the directory back") {
					t.Fatalf("POST %s while away: %d %v, want 503 unavailable naming notes.md, the move and what to do", w.path, code, m)
				}
			}

			// The MCP door says the same: a read answers from the sidecar,
			// a commit is the unavailable error (HTTP 503, -32603).
			mcp := mcptest.New(httpClient, s.Banner.MCPURL, agent.SessionToken, false, "ce-cli-tests")
			if res, err := mcp.Call(context.Background(), "tools/call", map[string]any{"name": "workspace_read", "arguments": map[string]any{}}); err != nil || !strings.Contains(string(res), "step one") || strings.Contains(string(res), `"isError":true`) {
				t.Fatalf("MCP workspace_read while away: %v %s", err, res)
			}
			_, err := mcp.Call(context.Background(), "tools/call", map[string]any{"name": "workspace_commit", "arguments": map[string]any{"proposal_id": approved}})
			var rpc *mcptest.RPCError
			if !errors.As(err, &rpc) || rpc.Status != http.StatusServiceUnavailable || rpc.Code != -32603 || !strings.Contains(rpc.Message, "moved or replaced") {
				t.Fatalf("MCP workspace_commit while away: %v, want HTTP 503, -32603, saying the directory moved", err)
			}

			// Nothing was created where the directory was, or where it leads now.
			want := map[string]string{"nothing in its place": "(missing)", "a new directory in its place": "", "a symlink to another directory in its place": "notes.md"}[c.name]
			if got := dirNames(t, dir); got != want {
				t.Fatalf("where the directory was: %q, want %q (no sidecar, no document written there)", got, want)
			}
			if got := dirNames(t, elsewhere); got != "notes.md" {
				t.Fatalf("the other directory holds %q, want only its own notes.md", got)
			}
			if b, _ := os.ReadFile(filepath.Join(elsewhere, "notes.md")); string(b) != stranger {
				t.Fatalf("the other directory's notes.md was changed: %q", b)
			}

			// An edit made where the directory is now, while it is away.
			edited := strings.Replace(readsDoc, "step one", "step one, edited while away", 1)
			if err := os.WriteFile(filepath.Join(dir+".old", "notes.md"), []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.name != "nothing in its place" {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Rename(dir+".old", dir); err != nil {
				t.Fatal(err)
			}

			// Back: no restart; the edit becomes version 2 by itself.
			deadline := time.Now().Add(fileTimeout)
			for {
				code, m := call("GET", "/workspace/status", nil)
				if code == http.StatusOK && m["version"] == float64(2) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the directory came back: %d %v, want version 2 (the edit made while away)", code, m)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if m := ok("GET", "/workspace/read", nil); m["content"] != edited {
				t.Fatalf("read after the return: %v", m)
			}
			fresh := propose(2, "## Risks\n\ncommitted after the return\n")
			if m := ok("POST", "/workspace/commit", map[string]any{"proposal_id": fresh}); m["version"] != float64(3) {
				t.Fatalf("commit after the return: %v, want version 3", m)
			}
			if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "committed after the return") || !strings.Contains(string(b), "edited while away") {
				t.Fatalf("the document after the commit: %q, %v", b, err)
			}
			ch := ok("GET", "/workspace/changes_since?version=0", nil)
			var summaries []string
			for _, v := range ch["changes"].([]any) {
				summaries = append(summaries, fmt.Sprint(v.(map[string]any)["version"], ":", v.(map[string]any)["summary"]))
			}
			if got := strings.Join(summaries, ", "); got != "1:workspace created, 2:external substrate edit, 3:risks" {
				t.Fatalf("history after the return: %s", got)
			}
			if got := dirNames(t, base); got != "dir elsewhere" {
				t.Fatalf("the base directory holds %q, want dir and elsewhere only", got)
			}
			if got := dirNames(t, elsewhere); got != "notes.md" {
				t.Fatalf("the other directory holds %q at the end, want only its own notes.md", got)
			}
			if code := s.stop(os.Interrupt); code != 0 {
				t.Fatalf("ce serve exited %d after the return, want 0", code)
			}
			if exists(ownerOf(file)) {
				t.Fatal("the operator credential is left beside the document after a graceful stop")
			}
		})
	}
}
