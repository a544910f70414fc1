package cli

import (
	"bytes"
	"encoding/json"

	"github.com/commonroom/ce/internal/jsonscan"
)

// The bridge looks into every message it passes, in both directions, for a
// handful of members (the method's routing fields, the result's
// 2026-07-28-only members). Decoding whole messages into maps and encoding
// them again for that cost several passes with reflection over bodies of
// up to megabytes; objectMembers finds the members of one object in a
// single pass over bytes already known to be valid JSON (walked with
// jsonscan, as the MCP door walks its requests), and the bridge splices
// what it changes, which is why it keeps each member's span.

// jsonMember is one member of a JSON object.
type jsonMember struct {
	key        []byte // as written, quotes included
	from       int    // where the member (its key) begins
	start, end int    // its value: obj[start:end]
}

// is reports whether the member's key, as written, is the plain string k
// (the keys the bridge looks for are ASCII without escapes).
func (m jsonMember) is(k string) bool {
	return len(m.key) == len(k)+2 && string(m.key[1:len(m.key)-1]) == k
}

// objectMembers lists the members of obj, in order, without decoding
// them. obj must be valid JSON (callers check it first); for anything that
// is not an object it returns ok=false, and it never reads out of bounds.
func objectMembers(obj []byte) (members []jsonMember, ok bool) {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	i = jsonscan.SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil, true
	}
	for i < len(obj) {
		from := i
		if obj[i] != '"' {
			return nil, false
		}
		i = jsonscan.StringEnd(obj, i)
		key := obj[from:i]
		i = jsonscan.SkipSpace(obj, i)
		if i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		i = jsonscan.SkipSpace(obj, i+1)
		start := i
		i = jsonscan.ValueEnd(obj, i)
		if i == start {
			return nil, false
		}
		members = append(members, jsonMember{key: key, from: from, start: start, end: i})
		i = jsonscan.SkipSpace(obj, i)
		if i >= len(obj) {
			return nil, false
		}
		switch obj[i] {
		case ',':
			i = jsonscan.SkipSpace(obj, i+1)
		case '}':
			return members, true
		default:
			return nil, false
		}
	}
	return nil, false
}

// member returns the value of the member named k, if obj has one.
func member(members []jsonMember, obj []byte, k string) ([]byte, bool) {
	for _, m := range members {
		if m.is(k) {
			return obj[m.start:m.end], true
		}
	}
	return nil, false
}

// stringValue decodes a JSON string value; ok is false for anything else.
func stringValue(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// appendObject appends to dst the object made of the members of obj that
// keep accepts, with extra (already encoded members, comma-joined, or
// empty) first.
func appendObject(dst []byte, extra []byte, obj []byte, members []jsonMember, keep func(jsonMember) bool) []byte {
	dst = append(dst, '{')
	dst = append(dst, extra...)
	first := len(extra) == 0
	for _, m := range members {
		if keep != nil && !keep(m) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, obj[m.from:m.end]...)
	}
	return append(dst, '}')
}
