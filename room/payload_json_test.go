package room

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// The event ring's payloads are read by clients byte for byte (history,
// handoff_events, listen): the fast encoder must write exactly what
// json.Marshal writes, for every string and every value type it accepts.
func TestPayloadEncodingIsJSONMarshalsByteForByte(t *testing.T) {
	cases := []struct {
		name    string
		payload map[string]any
	}{
		{"empty", map[string]any{}},
		{"a handoff event", map[string]any{"handoff_id": "handoff_abc", "task_id": "task_x", "actor_id": "p_1",
			"status": "open", "workspace_id": "ws_1", "is_error": true}},
		{"numbers", map[string]any{"version": 1, "base": int64(-42), "big": int64(1) << 62}},
		{"HTML and quotes are escaped", map[string]any{"s": `<a href="x">&'</a>\`}},
		{"control characters", map[string]any{"s": "a\nb\rc\td\be\ff\x00\x01\x1f\x7f"}},
		{"invalid UTF-8 and line separators", map[string]any{"s": "ok\xffbad\xc3(\u2028\u2029é😀"}},
		{"keys needing escapes sort as strings", map[string]any{"b<": 1, "a\"": 2, "é": 3, "A": 4}},
		{"a value of another type falls back", map[string]any{"list": []string{"x"}, "n": 1.5, "nil": nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := json.Marshal(c.payload)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodePayload(c.payload)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("encoded %s, json.Marshal gives %s", got, want)
			}
		})
	}
	t.Run("random strings", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		alphabet := []string{"a", "Z", "0", " ", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "😀", "\xff", "\xc3", "\xe2\x80"}
		for range 5000 {
			var b strings.Builder
			for range rng.IntN(12) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			p := map[string]any{"k": b.String(), b.String(): true}
			want, _ := json.Marshal(p)
			got, _ := encodePayload(p)
			if string(got) != string(want) {
				t.Fatalf("for %q: encoded %s, json.Marshal gives %s", b.String(), got, want)
			}
		}
	})
}
