package httpapi

// The agent guide as an MCP resource (issue 24): listed as
// skill://commonroom/SKILL.md, read with the session's read capability as
// the bytes GET /skills/commonroom serves, and static, so a listen never
// acknowledges it and a legacy subscription to it keeps nothing.

import (
	"net/http"
	"slices"
	"testing"

	"github.com/commonroom/ce/httpapi/skill"
)

func TestSkillResource(t *testing.T) {
	h := newHarness(t, "")
	reader := h.join("reader", "read")
	blind := h.join("blind", "propose", "checkout")
	doc := h.Eng.DocumentURI()
	c := &http.Client{}

	t.Run("resources/list lists the guide as text/markdown with a name, title and description", func(t *testing.T) {
		list, _ := reader.mcp.ok(t, "resources/list", nil)["resources"].([]any)
		var guide map[string]any
		for _, r := range list {
			if jsonAt(r, "uri") == skill.URI {
				guide, _ = r.(map[string]any)
			}
		}
		if guide == nil {
			t.Fatalf("resources = %v, want %s among them", list, skill.URI)
		}
		for _, k := range []string{"name", "title", "description"} {
			if str(guide[k]) == "" {
				t.Errorf("the guide's entry has no %s: %v", k, guide)
			}
		}
		if guide["mimeType"] != "text/markdown" {
			t.Errorf("mimeType = %v, want text/markdown", guide["mimeType"])
		}
	})
	t.Run("resources/read gives the bytes GET /skills/commonroom serves", func(t *testing.T) {
		res := reader.mcp.ok(t, "resources/read", map[string]any{"uri": skill.URI})
		contents, _ := res["contents"].([]any)
		plain := h.Do(t, "GET", h.IngressURL("/skills/commonroom"), "", nil)
		if len(contents) != 1 || jsonAt(contents[0], "uri") != skill.URI || jsonAt(contents[0], "mimeType") != "text/markdown" {
			t.Fatalf("contents = %v", contents)
		}
		if text := str(jsonAt(contents[0], "text")); text != string(plain.Body) || text != skill.Text() || len(text) < 1000 {
			t.Errorf("the resource's text (%d bytes) is not GET /skills/commonroom's (%d bytes)", len(text), len(plain.Body))
		}
		wantCaching(t, res)
	})
	t.Run("a session without read is refused it, as the document", func(t *testing.T) {
		guide := blind.mcp.call(t, "resources/read", map[string]any{"uri": skill.URI})
		document := blind.mcp.call(t, "resources/read", map[string]any{"uri": doc})
		if guide.Result != nil || guide.Error == nil || jsonAt(guide.Body, "error", "data", "error") != "permission_denied" {
			t.Fatalf("answer %s, want a JSON-RPC error with data.error permission_denied", guide.Raw)
		}
		if guide.Status != document.Status || guide.Error.Code != document.Error.Code {
			t.Errorf("the guide's refusal %d %d differs from the document's %d %d", guide.Status, guide.Error.Code, document.Status, document.Error.Code)
		}
		if l, _ := blind.mcp.ok(t, "resources/list", nil)["resources"].([]any); len(l) != 0 {
			t.Errorf("a session without read is listed %v", l)
		}
	})
	t.Run("a listen naming the guide acknowledges only what can change", func(t *testing.T) {
		s, ack := h.listen(t, c, reader.SessionToken, "1", map[string]any{"resourceSubscriptions": []string{skill.URI, doc}}, false)
		if got := decodeStrings(t, ack["resourceSubscriptions"]); !slices.Equal(got, []string{doc}) {
			t.Errorf("acknowledged %v, want only the document", got)
		}
		s.close()
		s, ack = h.listen(t, c, reader.SessionToken, "2", map[string]any{"resourceSubscriptions": []string{skill.URI}}, false)
		if len(ack) != 0 {
			t.Errorf("acknowledged %v for the guide alone, want {}", ack)
		}
		s.close()
	})
	t.Run("a legacy subscription to the guide is acknowledged and keeps nothing", func(t *testing.T) {
		wantResult(t, reader.mcp.call(t, "resources/subscribe", map[string]any{"uri": skill.URI}))
		if got := held(h.API, reader.SessionRef); len(got) != 0 {
			t.Errorf("the registry keeps %v", got)
		}
		wantResult(t, reader.mcp.call(t, "resources/unsubscribe", map[string]any{"uri": skill.URI}))
		r := blind.mcp.call(t, "resources/subscribe", map[string]any{"uri": skill.URI})
		if r.Result != nil || jsonAt(r.Body, "error", "data", "error") != "permission_denied" {
			t.Errorf("a session without read subscribed to the guide: %s", r.Raw)
		}
	})
}
