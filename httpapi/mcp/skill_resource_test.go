package mcp_test

// The agent guide as an MCP resource (issue 24): listed as
// skill://commonroom/SKILL.md, read with the session's read capability as
// the bytes GET /skills/commonroom serves, and static, so a listen never
// acknowledges it and a legacy subscription to it keeps nothing.

import (
	"net/http"
	"slices"
	"testing"

	"github.com/commonroom/ce/httpapi/skill"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

func TestSkillResource(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	reader := h.Join("reader", "read")
	blind := h.Join("blind", "propose", "checkout")
	doc := h.Eng.DocumentURI()
	c := &http.Client{}

	t.Run("resources/list lists the guide as text/markdown with a name, title and description", func(t *testing.T) {
		list, _ := reader.MCP.OK(t, "resources/list", nil)["resources"].([]any)
		var guide map[string]any
		for _, r := range list {
			if roomtest.JSONAt(r, "uri") == skill.URI {
				guide, _ = r.(map[string]any)
			}
		}
		if guide == nil {
			t.Fatalf("resources = %v, want %s among them", list, skill.URI)
		}
		for _, k := range []string{"name", "title", "description"} {
			if roomtest.Str(guide[k]) == "" {
				t.Errorf("the guide's entry has no %s: %v", k, guide)
			}
		}
		if guide["mimeType"] != "text/markdown" {
			t.Errorf("mimeType = %v, want text/markdown", guide["mimeType"])
		}
	})
	t.Run("resources/read gives the bytes GET /skills/commonroom serves", func(t *testing.T) {
		res := reader.MCP.OK(t, "resources/read", map[string]any{"uri": skill.URI})
		contents, _ := res["contents"].([]any)
		plain := h.Do(t, "GET", h.IngressURL("/skills/commonroom"), "", nil)
		if len(contents) != 1 || roomtest.JSONAt(contents[0], "uri") != skill.URI || roomtest.JSONAt(contents[0], "mimeType") != "text/markdown" {
			t.Fatalf("contents = %v", contents)
		}
		if text := roomtest.Str(roomtest.JSONAt(contents[0], "text")); text != string(plain.Body) || text != skill.Text() || len(text) < 1000 {
			t.Errorf("the resource's text (%d bytes) is not GET /skills/commonroom's (%d bytes)", len(text), len(plain.Body))
		}
		roomtest.WantCaching(t, res)
	})
	t.Run("a session without read is refused it, as the document", func(t *testing.T) {
		guide := blind.MCP.Call(t, "resources/read", map[string]any{"uri": skill.URI})
		document := blind.MCP.Call(t, "resources/read", map[string]any{"uri": doc})
		if guide.Result != nil || guide.Error == nil || roomtest.JSONAt(guide.Body, "error", "data", "error") != "permission_denied" {
			t.Fatalf("answer %s, want a JSON-RPC error with data.error permission_denied", guide.Raw)
		}
		if guide.Status != document.Status || guide.Error.Code != document.Error.Code {
			t.Errorf("the guide's refusal %d %d differs from the document's %d %d", guide.Status, guide.Error.Code, document.Status, document.Error.Code)
		}
		if l, _ := blind.MCP.OK(t, "resources/list", nil)["resources"].([]any); len(l) != 0 {
			t.Errorf("a session without read is listed %v", l)
		}
	})
	t.Run("a listen naming the guide acknowledges only what can change", func(t *testing.T) {
		s, ack := h.Listen(t, c, reader.SessionToken, "1", map[string]any{"resourceSubscriptions": []string{skill.URI, doc}}, false)
		if got := roomtest.DecodeStrings(t, ack["resourceSubscriptions"]); !slices.Equal(got, []string{doc}) {
			t.Errorf("acknowledged %v, want only the document", got)
		}
		s.Close()
		s, ack = h.Listen(t, c, reader.SessionToken, "2", map[string]any{"resourceSubscriptions": []string{skill.URI}}, false)
		if len(ack) != 0 {
			t.Errorf("acknowledged %v for the guide alone, want {}", ack)
		}
		s.Close()
	})
	t.Run("a legacy subscription to the guide is acknowledged and keeps nothing", func(t *testing.T) {
		roomtest.WantResult(t, reader.MCP.Call(t, "resources/subscribe", map[string]any{"uri": skill.URI}))
		if got := held(h, reader.SessionRef); len(got) != 0 {
			t.Errorf("the registry keeps %v", got)
		}
		roomtest.WantResult(t, reader.MCP.Call(t, "resources/unsubscribe", map[string]any{"uri": skill.URI}))
		r := blind.MCP.Call(t, "resources/subscribe", map[string]any{"uri": skill.URI})
		if r.Result != nil || roomtest.JSONAt(r.Body, "error", "data", "error") != "permission_denied" {
			t.Errorf("a session without read subscribed to the guide: %s", r.Raw)
		}
	})
}
