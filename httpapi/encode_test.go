package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// TestStreamedEncodingKeepsTheBytes: sendJSON encodes straight into the
// response (a list element by element); what a client receives is byte for
// byte what json.Marshal (HTML-escaped, for the HTTP routes) produces, with
// one newline after it. A value that cannot be encoded is still a clean
// error answer. (The MCP door's encoder, rpc.WriteResult, is not
// HTML-escaped and has its own test: TestStreamedResultKeepsTheBytes in
// httpapi/mcp/internal/rpc.)
func TestStreamedEncodingKeepsTheBytes(t *testing.T) {
	for i, v := range mcptest.EncodingSamples() {
		t.Run("HTTP answer "+string(rune('A'+i))+" is json.Marshal and a newline", func(t *testing.T) {
			w := httptest.NewRecorder()
			sendJSON(w, http.StatusTeapot, v)
			want, _ := json.Marshal(v)
			if w.Code != http.StatusTeapot || !bytes.Equal(w.Body.Bytes(), append(want, '\n')) {
				t.Fatalf("status %d, body %.200q…, want %.200q…", w.Code, w.Body.Bytes(), want)
			}
		})
	}
	t.Run("a list whose element cannot be encoded is a 500 at HTTP", func(t *testing.T) {
		w := httptest.NewRecorder()
		sendJSON(w, http.StatusOK, []any{1, func() {}})
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"internal"`) {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("a list that fails after part of it was sent breaks the connection", func(t *testing.T) {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", r)
			}
		}()
		sendJSON(httptest.NewRecorder(), http.StatusOK, []any{strings.Repeat("a", streamChunk), func() {}})
		t.Fatal("sendJSON returned after a half-sent list")
	})
	t.Run("a value that cannot be encoded is a 500 at HTTP", func(t *testing.T) {
		w := httptest.NewRecorder()
		sendJSON(w, http.StatusOK, map[string]any{"f": func() {}})
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"internal"`) {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}
