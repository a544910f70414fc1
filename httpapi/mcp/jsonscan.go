package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The envelope of every MCP request is taken apart layer by layer, in the
// order the spec validates it: the body, params, params._meta, its client
// capabilities and their extensions. With encoding/json each layer cost a
// validity scan and a reflective decode of the same bytes again. The body is
// checked once with json.Valid; every layer after that is a slice of it, so
// it is split here in one pass with no further checking.

var errNotObject = errors.New("not a JSON object")

// objectMembers splits a JSON object that is already known to be valid into
// its members, keeping each value's bytes as sent. It agrees with
// json.Unmarshal into map[string]json.RawMessage: keys are unescaped the way
// encoding/json does (invalid UTF-8 becomes U+FFFD), and a repeated key
// keeps its last value. The values alias raw.
func objectMembers(raw []byte) (map[string]json.RawMessage, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errNotObject
	}
	m := make(map[string]json.RawMessage, 8)
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return m, nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, errNotObject
		}
		end := stringEnd(raw, i)
		key, err := unquoteString(raw[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errNotObject
		}
		i = skipSpace(raw, i+1)
		vend := valueEnd(raw, i)
		if vend <= i {
			return nil, errNotObject
		}
		m[key] = json.RawMessage(raw[i:vend])
		i = skipSpace(raw, vend)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return m, nil
		default:
			return nil, errNotObject
		}
	}
	return nil, errNotObject
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
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

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
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

// unquoteString turns a quoted JSON string (a key or a value) into its
// text: as written when it is plain UTF-8 without escapes (almost always),
// through encoding/json otherwise.
func unquoteString(q []byte) (string, error) {
	if len(q) < 2 || q[len(q)-1] != '"' {
		return "", errNotObject
	}
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}
