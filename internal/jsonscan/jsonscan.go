// Package jsonscan finds where the values of JSON text begin and end,
// without decoding them. Two places look into every message they pass: the
// MCP door splits each request's envelope into its members, and `ce mcp`
// finds the few members it routes by or reshapes in each message, both
// ways. With encoding/json each look cost a validity scan and a reflective
// decode of the same bytes again; these three functions let both walk
// bytes already known to be valid JSON in one pass.
//
// The input must be valid JSON where it matters: on anything else the
// functions still never read out of bounds, but the spans they give mean
// nothing.
package jsonscan

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (len(b) if none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// StringEnd returns the index just past the string starting at b[i] == '"'
// (len(b) if it is not closed).
func StringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++ // the escaped byte cannot end the string
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// ValueEnd returns the index just past the value starting at b[i]: a
// string, an object or array (to its matching close), or a number, true,
// false or null (to the next delimiter or space). It is len(b) for a value
// that is not closed.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // a number, true, false or null
		j := i
		for ; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
		}
		return j
	}
}
