package traceparent

import (
	"strings"
	"testing"
)

func TestTraceID(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		name, in string
		want     string // "" = not a trace id
	}{
		{"a valid traceparent gives its trace id", valid, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"unsampled flags are still read", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"empty is ignored", "", ""},
		{"uppercase hex is ignored", strings.ToUpper(valid), ""},
		{"another version is ignored", "01" + valid[2:], ""},
		{"version ff is ignored", "ff" + valid[2:], ""},
		{"a longer value (future version fields) is ignored", valid + "-ab", ""},
		{"a huge value is ignored", valid + strings.Repeat("a", 1<<16), ""},
		{"one byte short is ignored", valid[:54], ""},
		{"an all-zero trace id is ignored", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"an all-zero parent id is ignored", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		{"a non-hex digit is ignored", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", ""},
		{"a misplaced separator is ignored", "00-4bf92f3577b34da6a3ce929d0e0e4736000f067aa0ba902b7-01", ""},
		{"spaces around it are ignored", " " + valid[:54], ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := TraceID(c.in)
			if got != c.want || ok != (c.want != "") {
				t.Errorf("TraceID(%.80q) = %q, %v; want %q", c.in, got, ok, c.want)
			}
			got, ok = TraceID([]byte(c.in))
			if got != c.want || ok != (c.want != "") {
				t.Errorf("TraceID([]byte %.80q) = %q, %v; want %q", c.in, got, ok, c.want)
			}
		})
	}
}

func TestFromJSON(t *testing.T) {
	const valid = `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	for _, c := range []struct {
		name, in string
		want     string
	}{
		{"a JSON string holding a traceparent gives its trace id", valid, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"a number is ignored", `12345`, ""},
		{"an object is ignored", `{"a":1}`, ""},
		{"an escaped character is ignored", `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u0031"`, ""},
		{"an unquoted value is ignored", valid[1 : len(valid)-1], ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := FromJSON([]byte(c.in))
			if got != c.want || ok != (c.want != "") {
				t.Errorf("FromJSON(%s) = %q, %v; want %q", c.in, got, ok, c.want)
			}
		})
	}
}
