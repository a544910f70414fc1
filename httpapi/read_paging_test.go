package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestReadPaging pages workspace_read with offset/next_offset at both front
// doors: the pages put back together are the section, and a bad offset is a
// clear invalid_request that changes nothing.
func TestReadPaging(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("reader", "read")
	mcp := newMCPClient(h, s.SessionToken, false)
	goals := "## Goals\n\nship it\nsoon\n\n"

	doors := []struct {
		name string
		read func(t *testing.T, args map[string]any) rpPage
	}{
		{"GET /workspace/read", func(t *testing.T, args map[string]any) rpPage {
			q := url.Values{}
			for k, v := range args {
				q.Set(k, fmt.Sprint(v))
			}
			r := h.do("GET", h.IngressURL("/workspace/read?"+q.Encode()), s.SessionToken, nil)
			m := r.JSON(t)
			if r.Status != http.StatusOK {
				code, _ := m["error"].(string)
				return rpPage{errCode: code}
			}
			return pageOf(m)
		}},
		{"workspace_read", func(t *testing.T, args map[string]any) rpPage {
			res := wantResult(t, mcp.call(t, "tools/call", map[string]any{"name": "workspace_read", "arguments": args}))
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] == true {
				code, _ := sc["error"].(string)
				return rpPage{errCode: code}
			}
			return pageOf(sc)
		}},
	}
	for _, door := range doors {
		t.Run(door.name+": pages of 5 bytes put back together are the section", func(t *testing.T) {
			var b strings.Builder
			args := map[string]any{"section": "Goals", "max_bytes": 5}
			for range 100 {
				p := door.read(t, args)
				if p.errCode != "" {
					t.Fatalf("error %s", p.errCode)
				}
				if p.offset != b.Len() {
					t.Fatalf("page at %d, pages so far end at %d", p.offset, b.Len())
				}
				b.WriteString(p.content)
				if !p.truncated {
					break
				}
				if p.next == nil {
					t.Fatal("a truncated page has no next_offset")
				}
				args["offset"] = *p.next
			}
			if b.String() != goals {
				t.Fatalf("pages joined = %q, want %q", b.String(), goals)
			}
		})
		for _, tc := range []struct {
			name   string
			offset any
		}{{"negative", -1}, {"past the end", len(goals) + 1}} {
			t.Run(door.name+": an offset "+tc.name+" is invalid_request", func(t *testing.T) {
				before := h.Snapshot()
				if p := door.read(t, map[string]any{"section": "Goals", "offset": tc.offset}); p.errCode != "invalid_request" {
					t.Fatalf("got %+v, want invalid_request", p)
				}
				h.AssertUnchanged(t, before)
			})
		}
	}
	t.Run("GET /workspace/read: an offset that is not a number is invalid_request", func(t *testing.T) {
		r := h.do("GET", h.IngressURL("/workspace/read?offset=ten"), s.SessionToken, nil)
		if m := wantError(t, r, http.StatusBadRequest, "invalid_request"); m["field"] != "offset" {
			t.Errorf("field = %v, want offset", m["field"])
		}
	})
	t.Run("resources/read still returns the section whole", func(t *testing.T) {
		res := mcp.ok(t, "resources/read", map[string]any{"uri": h.Eng.SectionURI("Idea/Goals")})
		if text := jsonAt(res, "contents"); !strings.Contains(fmt.Sprint(text), "ship it\nsoon") {
			t.Fatalf("contents %v", text)
		}
	})
}

// rpPage is one workspace_read answer as either front door gives it.
type rpPage struct {
	content   string
	truncated bool
	offset    int
	next      *int
	errCode   string
}

func pageOf(m map[string]any) rpPage {
	p := rpPage{}
	p.content, _ = m["content"].(string)
	p.truncated, _ = m["truncated"].(bool)
	if o, ok := m["offset"].(float64); ok {
		p.offset = int(o)
	}
	if n, ok := m["next_offset"].(float64); ok {
		v := int(n)
		p.next = &v
	}
	return p
}
