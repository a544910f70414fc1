package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
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
				rpc.WriteResult(got, json.RawMessage(id), raw)
				want := httptest.NewRecorder()
				rpc.WriteResult(want, json.RawMessage(id), referenceToolResult(t, s, out))
				if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("status %d, body\n%.400q\nwant status %d, body\n%.400q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
				}
				if got.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("content type %q", got.Header().Get("Content-Type"))
				}
				// A write's result goes out framed in a pooled buffer:
				// the same bytes.
				f, ok, err := s.frames.ToolResult(json.RawMessage(id), s.metaJSON, out)
				if err != nil || !ok {
					t.Fatalf("framed: ok %v, err %v", ok, err)
				}
				framed := httptest.NewRecorder()
				rpc.WriteResult(framed, json.RawMessage(id), f)
				if framed.Code != want.Code || !bytes.Equal(framed.Body.Bytes(), want.Body.Bytes()) || framed.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("framed: status %d, body\n%.400q\nwant status %d, body\n%.400q", framed.Code, framed.Body.Bytes(), want.Code, want.Body.Bytes())
				}
			})
		}
	}
	t.Run("an id that is not JSON is not framed", func(t *testing.T) {
		if _, ok, err := s.frames.ToolResult(json.RawMessage(`{nope`), s.metaJSON, "x"); ok || err != nil {
			t.Fatalf("framed an id that is not JSON: ok %v, err %v", ok, err)
		}
	})
	t.Run("an id that is not JSON fails as it did", func(t *testing.T) {
		raw, err := s.toolResult("x")
		if err != nil {
			t.Fatal(err)
		}
		got := httptest.NewRecorder()
		rpc.WriteResult(got, json.RawMessage(`{nope`), raw)
		want := httptest.NewRecorder()
		rpc.WriteResult(want, json.RawMessage(`{nope`), referenceToolResult(t, s, "x"))
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("status %d %q, want %d %q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
		}
	})
}

// referenceToolResult is how toolsCall built a successful result before
// it was encoded once: a map, with the text from json.Marshal.
func referenceToolResult(t *testing.T, h *Handler, out any) any {
	t.Helper()
	text, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var structured any = out
	if len(text) > 0 && text[0] != '{' {
		structured = map[string]any{"result": out}
	}
	return h.complete(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(text)}},
		"structuredContent": structured,
		"isError":           false,
	})
}

// TestPooledResultBuffersCarryNothingOver: the buffers a result is encoded
// in (the encoder's, the frame of a write's answer) are reused from request
// to request; an answer written after a larger one through the same pools
// is byte for byte what it is alone, with nothing of the larger one in it.
// Sizes straddle the frame pool's bound, so buffers both stay and go.
func TestPooledResultBuffersCarryNothingOver(t *testing.T) {
	s := newTestHandler(t, "dev")
	answer := func(n int) room.Handoff {
		return room.Handoff{HandoffID: fmt.Sprintf("handoff_%d", n), Status: "accepted", Summary: strings.Repeat("s", n), Artifacts: []room.Artifact{}}
	}
	sizes := []int{20_000, 3, rpc.MaxPooledFrame, 0, 100, rpc.MaxPooledFrame / 4, 1, 200_000, 7}
	for round := range 20 {
		for i, n := range sizes {
			out := answer(n)
			id := json.RawMessage(fmt.Sprint(round*100 + i))
			want := httptest.NewRecorder()
			rpc.WriteResult(want, id, referenceToolResult(t, s, out))
			f, ok, err := s.frames.ToolResult(id, s.metaJSON, out)
			if err != nil || !ok {
				t.Fatalf("framed: ok %v, err %v", ok, err)
			}
			got := httptest.NewRecorder()
			rpc.WriteResult(got, id, f)
			if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Fatalf("round %d, answer of %d bytes after one of %d: %d bytes\n%.300q\nwant %d bytes\n%.300q",
					round, n, sizes[(i+len(sizes)-1)%len(sizes)], got.Body.Len(), got.Body.Bytes(), want.Body.Len(), want.Body.Bytes())
			}
			// The memoized form (a read's) shares the encoder's pool.
			raw, err := s.toolResult(out)
			if err != nil {
				t.Fatal(err)
			}
			kept := httptest.NewRecorder()
			rpc.WriteResult(kept, id, raw)
			if !bytes.Equal(kept.Body.Bytes(), want.Body.Bytes()) {
				t.Fatalf("round %d, kept answer of %d bytes differs:\n%.300q\nwant\n%.300q", round, n, kept.Body.Bytes(), want.Body.Bytes())
			}
		}
	}
}
