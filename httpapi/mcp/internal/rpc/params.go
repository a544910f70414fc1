package rpc

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
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

// Plain is plainMembers of the request's params: the values of members a
// and b (nil when absent), or ok false when json.Unmarshal must decide.
func (r *Request) Plain(a, b string) (va, vb json.RawMessage, ok bool) {
	return plainMembers(r.members, a, b)
}

// DecodeParams reads a method's params into v; a wrong shape is -32602.
func DecodeParams(params json.RawMessage, v any) *Error {
	if err := json.Unmarshal(params, v); err != nil {
		return InvalidParams("invalid params: "+wirejson.JSONProblem(err), nil)
	}
	return nil
}

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

// PlainString reads a member json.Unmarshal would put in a string field: ok
// false for anything but a JSON string (null, a number: json.Unmarshal
// decides those).
func PlainString(raw json.RawMessage) (string, bool) {
	if raw == nil {
		return "", true
	}
	if kindOf(raw) != '"' {
		return "", false
	}
	s, err := unquoteString(bytes.TrimSpace(raw))
	return s, err == nil
}

// PlainStringIn is PlainString, with a string that table holds returned as
// table's copy (no allocation for a tool's name).
func PlainStringIn(raw json.RawMessage, table map[string]string) (string, bool) {
	if raw != nil && kindOf(raw) == '"' {
		if body, ok := plainBody(raw); ok {
			if s, ok := table[string(body)]; ok {
				return s, true
			}
		}
	}
	return PlainString(raw)
}
