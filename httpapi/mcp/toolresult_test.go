package mcp

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestToolResultBytesAreTheMapEncoding: a tools/call result encoded once
// (toolResult) is byte for byte what the result map sent before, whatever
// the answer holds: HTML-unsafe characters (escaped in the text copy only),
// U+2028 in strings and in raw messages, non-ASCII, answers that are not
// objects, a handoff with raw JSON inputs, and any request id.
func TestToolResultBytesAreTheMapEncoding(t *testing.T) {
	s := newTestHandler(t, "v<1>&\u2028")
	base := "x"
	handoff := room.Handoff{HandoffID: "handoff_1", Status: "accepted", Summary: "fix <b> & \"quote\" \\ é 😀\u2028\u2029\n\t",
		Constraints: &base, Artifacts: []room.Artifact{},
		Inputs: []room.HandoffInput{{Key: "q", Message: "<why>", RequestedSchema: json.RawMessage(`{"type":"object","d":"<\u2028>&"}`),
			Response: json.RawMessage("{\"a\":\"raw \xe2\x80\xa8 <&>\"}")}}}
	outs := map[string]any{
		"handoff":         handoff,
		"page":            room.HandoffPage{Handoffs: []room.Handoff{handoff, {}}},
		"map":             map[string]any{"z": "<", "a": []any{1.5, nil, true}},
		"list":            []string{"a", "<b>"},
		"empty list":      []int{},
		"nil":             nil,
		"string":          "<just & a string>",
		"number":          42,
		"raw object":      json.RawMessage(`{ "spaced" : [1, 2] }`),
		"raw non-object":  json.RawMessage(` [ "x" ] `),
		"raw U+2028 only": json.RawMessage("{\"a\":\"\xe2\x80\xa8 \xe2\x80\xa9\"}"),
		"long":            strings.Repeat("<&>é", 40_000),
		"struct with meta": struct {
			M map[string]any `json:"_meta"`
		}{map[string]any{"k": "\u2028"}},
	}
	for name, out := range outs {
		for _, id := range []string{`7`, `"id <&>"`, ` 12 `, `-3`} {
			t.Run(name+" with id "+id+" gives the same bytes", func(t *testing.T) {
				raw, err := s.toolResult(out)
				if err != nil {
					t.Fatal(err)
				}
				got := httptest.NewRecorder()
				writeRPCResult(got, json.RawMessage(id), raw)
				want := httptest.NewRecorder()
				writeRPCResult(want, json.RawMessage(id), referenceToolResult(t, s, out))
				if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("status %d, body\n%.400q\nwant status %d, body\n%.400q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
				}
				if got.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("content type %q", got.Header().Get("Content-Type"))
				}
			})
		}
	}
	t.Run("an id that is not JSON fails as it did", func(t *testing.T) {
		raw, err := s.toolResult("x")
		if err != nil {
			t.Fatal(err)
		}
		got := httptest.NewRecorder()
		writeRPCResult(got, json.RawMessage(`{nope`), raw)
		want := httptest.NewRecorder()
		writeRPCResult(want, json.RawMessage(`{nope`), referenceToolResult(t, s, "x"))
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("status %d %q, want %d %q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
		}
	})
}

// referenceToolResult is how mcpToolsCall built a successful result before
// it was encoded once: a map, with the text from json.Marshal.
func referenceToolResult(t *testing.T, s *Handler, out any) any {
	t.Helper()
	text, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var structured any = out
	if len(text) > 0 && text[0] != '{' {
		structured = map[string]any{"result": out}
	}
	return s.complete(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(text)}},
		"structuredContent": structured,
		"isError":           false,
	})
}
