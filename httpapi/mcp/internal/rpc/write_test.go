package rpc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStreamedResultKeepsTheBytes: WriteResult encodes straight into the
// response; what a client receives is byte for byte what MarshalJSON (not
// HTML-escaped) makes of the envelope, as it sent before it streamed. (A
// result that cannot be encoded: TestWriteRPCResult. The plain routes'
// sendJSON has the same test in httpapi.)
func TestStreamedResultKeepsTheBytes(t *testing.T) {
	type rec struct {
		ID      string            `json:"id"`
		Content string            `json:"content,omitempty"`
		Ptr     *int              `json:"ptr"`
		Tags    map[string]string `json:"tags"`
	}
	one := 1
	many := make([]rec, 3000) // a large result
	for i := range many {
		many[i] = rec{ID: strings.Repeat("<&>", i%7), Content: strings.Repeat("é\u2028", i%50), Tags: map[string]string{"b": "2", "a": "1"}}
	}
	for i, v := range []any{
		map[string]any{"a": "<b>&</b>", "n": 1, "s": []string{"x", "€😀"}},
		[]int{},
		[]int(nil),
		[]int{1, 2, 3},
		[]byte("bytes are base64"),
		[]*rec{{ID: "<x>", Ptr: &one}, nil, {}},
		[]any{"<", 1, nil, map[string]any{"z": []string{"&"}}},
		many,
		strings.Repeat("<long>", 100_000),
		struct {
			Content string `json:"content"`
		}{"\u2028 \"quoted\" \\ \n"},
	} {
		t.Run("MCP result "+string(rune('A'+i))+" is MarshalJSON of the envelope", func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteResult(w, json.RawMessage(`7`), v)
			want, _ := MarshalJSON(struct { // what WriteResult sent before it streamed
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id,omitempty"`
				Result  any             `json:"result"`
			}{"2.0", json.RawMessage(`7`), v})
			if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), want) {
				t.Fatalf("status %d, body %.200q…, want %.200q…", w.Code, w.Body.Bytes(), want)
			}
		})
	}
}
