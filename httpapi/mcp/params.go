package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The envelope layer has already split params into its members (decodeMeta)
// to check _meta and Mcp-Name. tools/call and tasks/get read one or two
// plain members of them; decoding params again with json.Unmarshal scanned
// and validated the whole object (the _meta included) a second time. These
// read the members already split, in the cases where that gives exactly what
// json.Unmarshal into the method's struct gives, and send every other case
// (a member named in another case, which encoding/json would also match; a
// value of another type, whose error message is encoding/json's) to
// json.Unmarshal as before.

// plainMembers returns the values of params members a and b (nil when
// absent), or ok false when params has a member that json.Unmarshal would
// also match to a or b (its name differs only in case).
func plainMembers(members *members, a, b string) (va, vb json.RawMessage, ok bool) {
	if members == nil {
		return nil, nil, false
	}
	for _, e := range members.list {
		k, v := e.key, e.val
		switch {
		case k == a:
			va = v
		case k == b:
			vb = v
		case strings.EqualFold(k, a) || strings.EqualFold(k, b):
			return nil, nil, false
		}
	}
	return va, vb, true
}

// plainString reads a member json.Unmarshal would put in a string field: ok
// false for anything but a JSON string (null, a number: json.Unmarshal
// decides those).
func plainString(raw json.RawMessage) (string, bool) {
	if raw == nil {
		return "", true
	}
	if kindOf(raw) != '"' {
		return "", false
	}
	s, err := unquoteString(bytes.TrimSpace(raw))
	return s, err == nil
}

// plainStringIn is plainString, with a string that table holds returned as
// table's copy (no allocation for a tool's name).
func plainStringIn(raw json.RawMessage, table map[string]string) (string, bool) {
	if raw != nil && kindOf(raw) == '"' {
		if body, ok := plainBody(raw); ok {
			if s, ok := table[string(body)]; ok {
				return s, true
			}
		}
	}
	return plainString(raw)
}
