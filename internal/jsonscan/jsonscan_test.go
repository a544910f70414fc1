package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int
	}{
		{"a string", `"a\"b",1`, 6},
		{"a string ending in an escaped backslash", `"a\\",1`, 5},
		{"an object with a string holding braces", `{"a":"}{","b":[1,{}]} x`, 21},
		{"an array", `[1,[2,[3]]],`, 11},
		{"a number", `-1.5e3,`, 6},
		{"a literal before a brace", `true}`, 4},
		{"null at the end", `null`, 4},
		{"an unclosed object", `{"a":[1,2`, 9},
		{"an unclosed string", `"abc`, 4},
		{"an unclosed string ending in a backslash", `"ab\`, 4},
		{"nothing", ``, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValueEnd([]byte(tc.in), 0); got != tc.want {
				t.Errorf("ValueEnd(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestSkipSpace(t *testing.T) {
	if got := SkipSpace([]byte(" \t\r\n x"), 0); got != 5 {
		t.Errorf("SkipSpace = %d, want 5", got)
	}
	if got := SkipSpace([]byte("   "), 1); got != 3 {
		t.Errorf("SkipSpace of spaces only = %d, want 3", got)
	}
}

// FuzzValueEnd holds ValueEnd to encoding/json: for valid JSON, the first
// value ends where a decoder stops reading it; for anything, it stays in
// bounds.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]"]}`, `"x\"y"`, `12 `, `[`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		end := ValueEnd(in, SkipSpace(in, 0))
		if end < 0 || end > len(in) {
			t.Fatalf("ValueEnd(%q) = %d, out of bounds", in, end)
		}
		if !json.Valid(in) {
			return
		}
		start := SkipSpace(in, 0)
		if !json.Valid(in[start:end]) || len(spaceTail(in[end:])) != 0 {
			t.Fatalf("ValueEnd(%q) = %d: %q is not the whole value", in, end, in[start:end])
		}
	})
}

// spaceTail is what is left of b after its leading whitespace.
func spaceTail(b []byte) []byte { return b[SkipSpace(b, 0):] }
