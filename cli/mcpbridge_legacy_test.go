package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The old-era adapter's pure parts: negotiation, the request rewrite and the
// answer's reshaping. The end-to-end behaviour is in mcpbridge_era_test.go.

func TestNegotiateAnswersTheAskedRevisionOrTheNewest(t *testing.T) {
	for _, tc := range []struct{ asked, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"2024-11-05", "2024-11-05"},
		{"2026-07-28", "2025-11-25"}, // initialize is not of that era
		{"1999-01-01", "2025-11-25"},
		{"", "2025-11-25"},
	} {
		t.Run(tc.asked, func(t *testing.T) {
			if got := negotiate(tc.asked); got != tc.want {
				t.Errorf("negotiate(%q) = %q, want %q", tc.asked, got, tc.want)
			}
		})
	}
}

func TestNewLegacyHost(t *testing.T) {
	t.Run("the tasks extension and the era's own capabilities are withheld, other extensions passed on", func(t *testing.T) {
		h, v, err := newLegacyHost(json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true},"sampling":{},
			"extensions":{"io.modelcontextprotocol/tasks":{},"io.modelcontextprotocol/ui":{"mimeTypes":["text/html"]}}},
			"clientInfo":{"name":"host","version":"1.2"}}`))
		if err != nil || v != "2025-06-18" {
			t.Fatalf("newLegacyHost: %v %q", err, v)
		}
		var caps map[string]any
		json.Unmarshal(h.meta[metaCapsKey], &caps)
		want := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []any{"text/html"}}}}
		if !reflect.DeepEqual(caps, want) {
			t.Errorf("capabilities forwarded: %v, want %v", caps, want)
		}
		if string(h.meta[metaVersionKey]) != `"2026-07-28"` || !strings.Contains(string(h.meta[metaInfoKey]), `"host"`) {
			t.Errorf("meta: %s / %s", h.meta[metaVersionKey], h.meta[metaInfoKey])
		}
	})
	t.Run("no extension but tasks: empty capabilities", func(t *testing.T) {
		h, _, err := newLegacyHost(json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"clientInfo":{"name":"a","version":"1"}}`))
		if err != nil || string(h.meta[metaCapsKey]) != `{}` {
			t.Fatalf("%v %s", err, h.meta[metaCapsKey])
		}
	})
	for _, tc := range []struct{ name, params string }{
		{"no protocolVersion", `{"capabilities":{},"clientInfo":{"name":"a","version":"1"}}`},
		{"no clientInfo", `{"protocolVersion":"2025-11-25","capabilities":{}}`},
		{"clientInfo without a version", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"a"}}`},
		{"clientInfo not an object", `{"protocolVersion":"2025-11-25","clientInfo":"a"}`},
		{"protocolVersion not a string", `{"protocolVersion":20251125,"clientInfo":{"name":"a","version":"1"}}`},
		{"params not an object", `[1]`},
		{"no params", ``},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			if _, _, err := newLegacyHost(json.RawMessage(tc.params)); err == nil {
				t.Errorf("accepted %s", tc.params)
			}
		})
	}
}

func TestLegacyRewrite(t *testing.T) {
	h, _, err := newLegacyHost(json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"9"}}`))
	if err != nil {
		t.Fatal(err)
	}
	decode := func(t *testing.T, line []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		return m
	}
	t.Run("the era's _meta replaces the host's io.modelcontextprotocol keys and keeps its own", func(t *testing.T) {
		line, params, err := h.rewrite(json.RawMessage(`"a"`), "tools/call", json.RawMessage(
			`{"name":"x","arguments":{"k":1},"_meta":{"progressToken":7,"traceparent":"00-ab","io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, line)
		p := m["params"].(map[string]any)
		meta := p["_meta"].(map[string]any)
		if m["jsonrpc"] != "2.0" || m["id"] != "a" || m["method"] != "tools/call" || p["name"] != "x" {
			t.Errorf("envelope: %s", line)
		}
		if meta["progressToken"] != float64(7) || meta["traceparent"] != "00-ab" || meta[metaVersionKey] != "2026-07-28" ||
			!reflect.DeepEqual(meta[metaCapsKey], map[string]any{}) || meta[metaInfoKey].(map[string]any)["name"] != "host" {
			t.Errorf("_meta: %v", meta)
		}
		if !json.Valid(params) || !strings.Contains(string(line), string(params)) {
			t.Errorf("params %s not the line's", params)
		}
	})
	t.Run("a request without params gets them; a notification gets no id", func(t *testing.T) {
		for _, in := range []string{``, `null`, `{}`} {
			line, _, err := h.rewrite(nil, "notifications/cancelled", json.RawMessage(in))
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, line)
			if _, ok := m["id"]; ok {
				t.Errorf("a notification got an id: %s", line)
			}
			if m["params"].(map[string]any)["_meta"].(map[string]any)[metaVersionKey] != "2026-07-28" {
				t.Errorf("params %q: %s", in, line)
			}
		}
	})
	for _, in := range []string{`[1]`, `"x"`, `{"_meta":[1]}`, `{"_meta":"x"}`} {
		t.Run("refused: params "+in, func(t *testing.T) {
			if _, _, err := h.rewrite(json.RawMessage(`1`), "tools/list", json.RawMessage(in)); err == nil {
				t.Errorf("params %s accepted", in)
			}
		})
	}
}

func TestReshape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"the 2026-07-28 members go, the rest stays in its order",
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[{"name":"a"}],"ttlMs":300000,"cacheScope":"public","nextCursor":"c","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"ce"}}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"nextCursor":"c"}}`},
		{"_meta keeps what is not serverInfo",
			`{"jsonrpc":"2.0","id":"x","result":{"resultType":"complete","contents":[],"_meta":{"commonroom/version":3,"io.modelcontextprotocol/serverInfo":{}}}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"contents":[],"_meta":{"commonroom/version":3}}}`},
		{"a structuredContent that is not an object is wrapped",
			`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[],"structuredContent":[1,2]}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"result":[1,2]}}}`},
		{"an object structuredContent is kept as it is",
			`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[],"structuredContent":{"a":1},"isError":false}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"a":1},"isError":false}}`},
		{"a task handle cannot be carried: an error",
			`{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"t"}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"the room answered with a \"task\" result, which this protocol version cannot carry"}}`},
		{"an error passes unchanged",
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown task","data":{"resultType":"x"}}}`,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown task","data":{"resultType":"x"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(reshape([]byte(tc.in))); got != tc.want {
				t.Errorf("reshape\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// FuzzLegacyShapes holds both directions of the old-era adapter to valid
// JSON out for valid JSON in: a host's params rewritten for the room, and a
// room's answer reshaped for the host.
func FuzzLegacyShapes(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x","_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","structuredContent":[1],"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task"}}`, `{"result":{"_meta":{}}}`, `[]`} {
		f.Add([]byte(s))
	}
	h, _, err := newLegacyHost(json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		if out := reshape(in); !json.Valid(out) {
			t.Fatalf("reshape(%s) = %s, not JSON", in, out)
		}
		line, params, err := h.rewrite(json.RawMessage(`7`), "tools/call", in)
		if err != nil {
			return
		}
		var m struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if !json.Valid(line) || !json.Valid(params) || json.Unmarshal(line, &m) != nil ||
			string(m.Params.Meta[metaVersionKey]) != `"2026-07-28"` {
			t.Fatalf("rewrite(%s) = %s", in, line)
		}
	})
}
