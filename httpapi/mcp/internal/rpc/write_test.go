package rpc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// TestStreamedResultKeepsTheBytes: WriteResult encodes straight into the
// response; what a client receives is byte for byte what MarshalJSON (not
// HTML-escaped) makes of the envelope, as it sent before it streamed. (A
// result that cannot be encoded: TestWriteRPCResult. The plain routes'
// sendJSON has the same test in httpapi.)
func TestStreamedResultKeepsTheBytes(t *testing.T) {
	for i, v := range mcptest.EncodingSamples() {
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
