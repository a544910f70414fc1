package room

import (
	"bytes"
	"testing"
)

// A completed task's stored tool result must be byte for byte what the map
// it replaced encoded to: clients read result_json back through tasks/result
// and the task notices.
func TestCompleteToolResultEncodesAsTheMapDid(t *testing.T) {
	asMap := func(handoffID string, r ResultInput) map[string]any {
		return map[string]any{
			"resultType":        "complete",
			"content":           []any{map[string]any{"type": "text", "text": r.Text}},
			"structuredContent": map[string]any{"handoff_id": handoffID, "artifacts": r.Artifacts},
			"isError":           r.IsError,
		}
	}
	cases := []struct {
		name string
		in   ResultInput
	}{
		{"plain_text_without_artifacts", ResultInput{Text: "done", Artifacts: []Artifact{}}},
		{"nil_artifacts", ResultInput{Text: "done"}},
		{"an_error_result", ResultInput{Text: "could not", IsError: true, Artifacts: []Artifact{}}},
		{"html_quotes_and_controls_unescaped_alike", ResultInput{Text: "<a href=\"x\">&amp;</a>\\ \t\n\u0001 \u2028\u2029 é 🙂", Artifacts: []Artifact{}}},
		{"artifacts_full_and_sparse", ResultInput{Text: "", Artifacts: []Artifact{
			{URI: "commonroom://doc#s1", Title: "<title>", MediaType: "text/markdown", Digest: "sha256:ab"},
			{URI: "https://example.com/?a=1&b=2"},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := encodeJSON(asMap("handoff_0123456789abcdef0123456789abcdef", tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeJSON(newCompleteToolResult("handoff_0123456789abcdef0123456789abcdef", tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the struct encodes to\n%s\nthe map to\n%s", got, want)
			}
		})
	}
}
