package mcptest

import "strings"

// EncodingSamples are values whose JSON is easy to get wrong when written
// straight into a response rather than marshalled first: HTML-sensitive
// characters, U+2028, non-ASCII, empty and nil slices, bytes, nil pointers
// in a list, a large list (more than one streamed chunk) and a long
// string. The plain door's sendJSON and the MCP door's WriteResult are both
// tested on them, so both stream exactly what marshalling would produce.
func EncodingSamples() []any {
	type rec struct {
		ID      string            `json:"id"`
		Content string            `json:"content,omitempty"`
		Ptr     *int              `json:"ptr"`
		Tags    map[string]string `json:"tags"`
	}
	one := 1
	many := make([]rec, 3000) // more than one streamed chunk
	for i := range many {
		many[i] = rec{ID: strings.Repeat("<&>", i%7), Content: strings.Repeat("é\u2028", i%50), Tags: map[string]string{"b": "2", "a": "1"}}
	}
	return []any{
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
	}
}
