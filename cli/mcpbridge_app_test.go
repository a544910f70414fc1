package cli

// The room's board (an MCP App) through `ce mcp`: a host of MCP 2025-11-25
// that declares io.modelcontextprotocol/ui in initialize is shown it —
// the bridge carries the extension into every forwarded request's _meta —
// and one that does not declare it sees the catalog without it.

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
)

func TestMCPBridgeApp(t *testing.T) {
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	startServe(t, dir, "serve", "idea.md", "--json")
	uiCaps := map[string]any{"extensions": map[string]any{mcpapp.Extension: map[string]any{"mimeTypes": []string{mcpapp.MimeType}}}}

	t.Run("a 2025-11-25 host declaring the extension sees the links, reads the board and calls the app-only tool", func(t *testing.T) {
		b := startBridge(t, dir, inviteOnce(t, dir, file), filepath.Join(t.TempDir(), "s.json"), nil)
		if l := b.initialize(1, "2025-11-25", uiCaps); l.Error != nil {
			t.Fatalf("initialize: %s", l.raw)
		}
		b.oldRequest(nil, "notifications/initialized", nil)
		tools := map[string]map[string]any{}
		for _, x := range b.oldOK(2, "tools/list", nil)["tools"].([]any) {
			tools[x.(map[string]any)["name"].(string)] = x.(map[string]any)
		}
		if got := roomtest.JSONAt(tools["handoff_list"], "_meta", "ui", "resourceUri"); got != mcpapp.BoardURI {
			t.Errorf("handoff_list _meta: %v", tools["handoff_list"]["_meta"])
		}
		if got := roomtest.JSONAt(tools[mcpapp.BoardTool], "_meta", "ui", "visibility"); len(asSlice(got)) != 1 || asSlice(got)[0] != "app" {
			t.Errorf("%s: %v", mcpapp.BoardTool, tools[mcpapp.BoardTool])
		}
		read := b.oldOK(3, "resources/read", map[string]any{"uri": mcpapp.BoardURI})
		c := asSlice(read["contents"])[0].(map[string]any)
		if c["mimeType"] != mcpapp.MimeType || c["text"] != mcpapp.HTML() || roomtest.JSONAt(c, "_meta", "ui", "csp") == nil {
			t.Errorf("resources/read of the board: mimeType %v, csp %v", c["mimeType"], roomtest.JSONAt(c, "_meta", "ui", "csp"))
		}
		board := b.oldTool(4, mcpapp.BoardTool, map[string]any{})
		if id, _ := roomtest.JSONAt(board, "me", "participant_id").(string); !strings.HasPrefix(id, "participant_") {
			t.Errorf("board: %v", board)
		}
	})

	t.Run("a 2026-07-28 host declaring the extension in _meta has it forwarded as sent", func(t *testing.T) {
		b := startBridge(t, dir, inviteOnce(t, dir, file), filepath.Join(t.TempDir(), "s.json"), nil)
		line, err := mcptest.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read",
			"params": map[string]any{"uri": mcpapp.BoardURI, "_meta": mcptest.Meta(mcptest.Version, uiCaps, "modern-host")}})
		if err != nil {
			t.Fatal(err)
		}
		b.send(string(line))
		l := b.answerTo("1", nil)
		if l.Error != nil || roomtest.JSONAt(asSlice(l.Result["contents"])[0], "mimeType") != mcpapp.MimeType {
			t.Errorf("resources/read of the board: %s", l.raw)
		}
		b.request(2, "resources/read", map[string]any{"uri": mcpapp.BoardURI}) // Tasks only: no board
		if l := b.answerTo("2", nil); l.Error == nil || l.Error.Code != rpcInvalidParams {
			t.Errorf("board read declaring only tasks: %s", l.raw)
		}
	})

	t.Run("a 2025-11-25 host without the extension sees no _meta.ui and the app-only tool is unknown to it", func(t *testing.T) {
		b := startBridge(t, dir, inviteOnce(t, dir, file), filepath.Join(t.TempDir(), "s.json"), nil)
		if l := b.initialize(1, "2025-11-25", nil); l.Error != nil {
			t.Fatalf("initialize: %s", l.raw)
		}
		b.oldRequest(nil, "notifications/initialized", nil)
		for _, x := range b.oldOK(2, "tools/list", nil)["tools"].([]any) {
			tool := x.(map[string]any)
			if _, has := tool["_meta"]; has || tool["name"] == mcpapp.BoardTool {
				t.Errorf("tool %v shown to a host without the extension", tool)
			}
		}
		if l := b.oldCall(3, "tools/call", map[string]any{"name": mcpapp.BoardTool, "arguments": map[string]any{}}); l.Error == nil ||
			l.Error.Code != rpcInvalidParams || !strings.Contains(l.Error.Message, "unknown tool") {
			t.Errorf("app-only tool without the extension: %s", l.raw)
		}
		if l := b.oldCall(4, "resources/read", map[string]any{"uri": mcpapp.BoardURI}); l.Error == nil || l.Error.Code != rpcInvalidParams {
			t.Errorf("board read without the extension: %s", l.raw)
		}
	})
}

func asSlice(v any) []any { s, _ := v.([]any); return s }
