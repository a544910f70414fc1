package mcp_test

// The room's board as an MCP App at the door: what a client declaring
// io.modelcontextprotocol/ui (with the MCP App MIME type) is shown on a
// request, what every other client is not, and that the app-only tool and
// the buttons' tools run with the session's own capabilities.

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// uiMeta is a conforming _meta whose capabilities carry ext as the MCP Apps
// extension's entry (nil: no extension at all).
func uiMeta(ext any) map[string]any {
	caps := map[string]any{}
	if ext != nil {
		caps["extensions"] = map[string]any{mcpapp.Extension: ext}
	}
	return mcptest.Meta(mcptest.Version, caps, "ui-test-host")
}

// declaredUI is how a host that renders MCP Apps declares the extension.
var declaredUI = uiMeta(map[string]any{"mimeTypes": []string{mcpapp.MimeType}})

// uiTool calls a tool with meta and returns the result.
func uiTool(t *testing.T, c *roomtest.MCP, meta any, name string, args any) map[string]any {
	t.Helper()
	return roomtest.WantResult(t, c.Do(t, mcptest.Request{Method: "tools/call", Params: map[string]any{"name": name, "arguments": args}, Meta: meta}))
}

// toolsByName is tools/list's answer by tool name.
func toolsByName(t *testing.T, c *roomtest.MCP, meta any) map[string]map[string]any {
	t.Helper()
	res := roomtest.WantResult(t, c.Do(t, mcptest.Request{Method: "tools/list", Meta: meta}))
	out := map[string]map[string]any{}
	for _, x := range res["tools"].([]any) {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func TestMCPAppBoard(t *testing.T) {
	h := apitest.New(t, roomtest.Options{Content: threeSections("A trip.", "To be written.", "Step one.")}, nil)
	owner := h.Join("owner", "read", "propose")
	worker := h.Join("worker", "read", "checkout")
	approver := h.Join("approver", "read", "approve")
	blind := h.Join("blind", "observe")

	hostile := `<script>alert(1)</script><img src=x onerror=alert(2)> [x](javascript:alert(3))`
	created := owner.MCP.ToolOK(t, "handoff_create", map[string]any{"summary": "book the hut " + hostile})
	hid, _ := roomtest.JSONAt(created, "handoff", "handoff_id").(string)
	worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
	worker.MCP.ToolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "booked " + hostile}})
	base := int64(owner.MCP.ToolOK(t, "workspace_status", nil)["version"].(float64))
	prop := owner.MCP.ToolOK(t, "workspace_propose", map[string]any{"target": "Goals", "base_version": base, "summary": "goals " + hostile,
		"change": map[string]any{"section": "Goals", "content": "## Goals\n\nWalk " + hostile + "\n\n"}})
	pid, _ := prop["proposal_id"].(string)
	if hid == "" || pid == "" {
		t.Fatalf("setup: handoff %v, proposal %v", created, prop)
	}

	plain := toolsByName(t, approver.MCP, nil)

	t.Run("a client that does not declare the extension sees no _meta.ui and no app-only tool", func(t *testing.T) {
		for name, tool := range plain {
			if _, has := tool["_meta"]; has {
				t.Errorf("%s carries _meta for a client without the extension: %v", name, tool["_meta"])
			}
		}
		if _, has := plain[mcpapp.BoardTool]; has {
			t.Errorf("%s is listed for a client without the extension", mcpapp.BoardTool)
		}
	})

	t.Run("a declaration without the MCP App MIME type is not one: the catalog is unchanged", func(t *testing.T) {
		for _, ext := range []any{map[string]any{}, map[string]any{"mimeTypes": []string{"text/html"}}, map[string]any{"mimeTypes": "text/html;profile=mcp-app"}, true, "yes"} {
			if got := toolsByName(t, approver.MCP, uiMeta(ext)); !reflect.DeepEqual(got, plain) {
				t.Errorf("extension entry %v changed tools/list", ext)
			}
		}
	})

	t.Run("a declaring client sees the board linked from the inbox and proposals, and the app-only board tool", func(t *testing.T) {
		got := toolsByName(t, approver.MCP, declaredUI)
		for name, tool := range got {
			want := plain[name]
			switch {
			case slices.Contains(mcpapp.LinkedTools, name):
				if roomtest.JSONAt(tool, "_meta", "ui", "resourceUri") != mcpapp.BoardURI {
					t.Errorf("%s: _meta = %v, want ui.resourceUri %s", name, tool["_meta"], mcpapp.BoardURI)
				}
				if v := roomtest.JSONAt(tool, "_meta", "ui", "visibility"); v != nil {
					t.Errorf("%s: visibility %v, want none (model and app)", name, v)
				}
				delete(tool, "_meta")
				if !reflect.DeepEqual(tool, want) {
					t.Errorf("%s differs beyond _meta: %v, want %v", name, tool, want)
				}
			case name == mcpapp.BoardTool:
				if roomtest.JSONAt(tool, "_meta", "ui", "resourceUri") != mcpapp.BoardURI || !reflect.DeepEqual(roomtest.JSONAt(tool, "_meta", "ui", "visibility"), []any{"app"}) {
					t.Errorf("%s: _meta = %v, want the board, visibility [app]", name, tool["_meta"])
				}
				if roomtest.JSONAt(tool, "annotations", "readOnlyHint") != true || roomtest.JSONAt(tool, "inputSchema", "type") != "object" {
					t.Errorf("%s: %v", name, tool)
				}
			default:
				if !reflect.DeepEqual(tool, want) {
					t.Errorf("%s differs for a declaring client: %v, want %v", name, tool, want)
				}
			}
		}
		if len(got) != len(plain)+1 {
			t.Errorf("declaring client sees %d tools, want %d", len(got), len(plain)+1)
		}
	})

	t.Run("resources/list names the board only for a declaring client", func(t *testing.T) {
		uris := func(meta any) []string {
			var out []string
			for _, r := range roomtest.WantResult(t, approver.MCP.Do(t, mcptest.Request{Method: "resources/list", Meta: meta}))["resources"].([]any) {
				out = append(out, r.(map[string]any)["uri"].(string))
				if r.(map[string]any)["uri"] == mcpapp.BoardURI && r.(map[string]any)["mimeType"] != mcpapp.MimeType {
					t.Errorf("board listed as %v", r)
				}
			}
			return out
		}
		if u := uris(nil); slices.Contains(u, mcpapp.BoardURI) {
			t.Errorf("plain client lists %v", u)
		}
		if u := uris(declaredUI); !slices.Contains(u, mcpapp.BoardURI) || len(u) != len(uris(nil))+1 {
			t.Errorf("declaring client lists %v", u)
		}
	})

	t.Run("resources/read of the board is its HTML and strict CSP for a declaring client", func(t *testing.T) {
		res := roomtest.WantResult(t, approver.MCP.Do(t, mcptest.Request{Method: "resources/read", Params: map[string]any{"uri": mcpapp.BoardURI}, Meta: declaredUI}))
		c := res["contents"].([]any)[0].(map[string]any)
		if c["uri"] != mcpapp.BoardURI || c["mimeType"] != mcpapp.MimeType || c["text"] != mcpapp.HTML() {
			t.Fatalf("content: uri %v mimeType %v, text %d bytes", c["uri"], c["mimeType"], len(c["text"].(string)))
		}
		csp, _ := roomtest.JSONAt(c, "_meta", "ui", "csp").(map[string]any)
		for _, k := range []string{"connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"} {
			if v, ok := csp[k].([]any); !ok || len(v) != 0 {
				t.Errorf("csp.%s = %v, want []", k, csp[k])
			}
		}
	})

	t.Run("resources/read of the board is not found for a client that does not declare", func(t *testing.T) {
		for _, meta := range []any{nil, uiMeta(map[string]any{})} {
			e := roomtest.WantRPCError(t, approver.MCP.Do(t, mcptest.Request{Method: "resources/read", Params: map[string]any{"uri": mcpapp.BoardURI}, Meta: meta}), http.StatusOK, mcptest.CodeInvalidParams)
			if e["message"] != "resource not found" {
				t.Errorf("error %v, want resource not found", e)
			}
		}
	})

	t.Run("the app-only tool is an unknown tool to a client that does not declare, as a made-up name is", func(t *testing.T) {
		before := h.Snapshot()
		e := roomtest.WantRPCError(t, approver.MCP.Do(t, mcptest.Request{Method: "tools/call", Params: map[string]any{"name": mcpapp.BoardTool}}), http.StatusOK, mcptest.CodeInvalidParams)
		other := roomtest.WantRPCError(t, approver.MCP.Do(t, mcptest.Request{Method: "tools/call", Params: map[string]any{"name": "no_such_tool"}}), http.StatusOK, mcptest.CodeInvalidParams)
		if e["message"] != "unknown tool: "+mcpapp.BoardTool || !reflect.DeepEqual(e["data"], map[string]any{"name": mcpapp.BoardTool}) ||
			!strings.HasPrefix(other["message"].(string), "unknown tool: ") {
			t.Errorf("refusal %v (a made-up name: %v)", e, other)
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("the board shows the session's inbox, results and pending proposals with diffs, text as stored", func(t *testing.T) {
		res := uiTool(t, approver.MCP, declaredUI, mcpapp.BoardTool, map[string]any{})
		if res["isError"] != false {
			t.Fatalf("board: %v", res)
		}
		sc := res["structuredContent"].(map[string]any)
		roomtest.CheckTextBlock(t, mcpapp.BoardTool, res, sc)
		if roomtest.JSONAt(sc, "me", "participant_id") != approver.ParticipantID || !reflect.DeepEqual(roomtest.JSONAt(sc, "me", "capabilities"), []any{"read", "approve"}) {
			t.Errorf("me = %v", sc["me"])
		}
		hs := sc["handoffs"].([]any)
		if len(hs) != 1 || roomtest.JSONAt(hs[0], "handoff_id") != hid || roomtest.JSONAt(hs[0], "status") != "result_ready" || roomtest.JSONAt(hs[0], "result", "text") != "booked "+hostile {
			t.Errorf("handoffs = %v", hs)
		}
		ps := sc["proposals"].([]any)
		if len(ps) != 1 || roomtest.JSONAt(ps[0], "proposal_id") != pid || roomtest.JSONAt(ps[0], "summary") != "goals "+hostile ||
			!strings.Contains(roomtest.JSONAt(ps[0], "diff", "diff").(string), "+Walk "+hostile) || roomtest.JSONAt(ps[0], "diff", "added") == float64(0) {
			t.Errorf("proposals = %v", ps)
		}
	})

	t.Run("a session without read is refused the board and its HTML", func(t *testing.T) {
		res := uiTool(t, blind.MCP, declaredUI, mcpapp.BoardTool, map[string]any{})
		if res["isError"] != true || roomtest.JSONAt(res, "structuredContent", "error") != "permission_denied" {
			t.Errorf("board for observe-only: %v", res)
		}
		roomtest.WantRPCError(t, blind.MCP.Do(t, mcptest.Request{Method: "resources/read", Params: map[string]any{"uri": mcpapp.BoardURI}, Meta: declaredUI}), http.StatusOK, -31003)
	})

	t.Run("bad arguments to the board are refused as a tool error and change nothing", func(t *testing.T) {
		before := h.Snapshot()
		for _, args := range []any{"all", []any{1}, 7} {
			res := uiTool(t, approver.MCP, declaredUI, mcpapp.BoardTool, args)
			if res["isError"] != true || roomtest.JSONAt(res, "structuredContent", "error") != "invalid_request" {
				t.Errorf("arguments %v: %v", args, res)
			}
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("the view's Approve runs with the session's capabilities: refused without approve, done with it", func(t *testing.T) {
		before := h.Snapshot()
		res := uiTool(t, owner.MCP, declaredUI, "handoff_approve", map[string]any{"handoff_id": hid})
		if res["isError"] != true || roomtest.JSONAt(res, "structuredContent", "error") != "permission_denied" {
			t.Fatalf("approve by the owner (no approve): %v", res)
		}
		h.AssertUnchanged(t, before)
		if res := uiTool(t, approver.MCP, declaredUI, "handoff_approve", map[string]any{"handoff_id": hid}); res["isError"] != false {
			t.Fatalf("approve by the approver: %v", res)
		}
		if got := owner.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid}); got["status"] != "approved" || got["decided_by"] != approver.ParticipantID {
			t.Errorf("after approve: %v", got)
		}
		if res := uiTool(t, approver.MCP, declaredUI, "workspace_review", map[string]any{"proposal_id": pid, "approve": false}); res["isError"] != false {
			t.Fatalf("reject the proposal: %v", res)
		}
		board := uiTool(t, approver.MCP, declaredUI, mcpapp.BoardTool, nil)["structuredContent"].(map[string]any)
		if ps := board["proposals"].([]any); len(ps) != 0 {
			t.Errorf("a rejected proposal is still pending on the board: %v", ps)
		}
	})
}

// The extension entry is read per request: the same session, declaring it
// on one request and not on the next, is answered each time as declared.
func TestMCPAppIsPerRequest(t *testing.T) {
	h := apitest.New(t, roomtest.Options{Content: threeSections("A trip.", "To be written.", "Step one.")}, nil)
	p := h.Join("p", "read")
	for i, meta := range []any{declaredUI, nil, declaredUI, uiMeta(json.RawMessage(`null`))} {
		_, listed := toolsByName(t, p.MCP, meta)[mcpapp.BoardTool]
		if want := i%2 == 0; listed != want {
			t.Errorf("request %d: board tool listed %v, want %v", i, listed, want)
		}
	}
}
