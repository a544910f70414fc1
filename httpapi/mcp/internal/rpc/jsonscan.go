package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
	"unsafe"

	"github.com/commonroom/ce/internal/jsonscan"
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
// keeps its last value. The values alias raw, and so do the keys that need
// no unescaping (almost all): raw must not change while they are in use.
func objectMembers(raw []byte) (*members, error) {
	m, err := splitMembers(raw, make([]member, 0, 8))
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// splitMembers is objectMembers into list (emptied first), which may be a
// caller's array: the envelope splits its objects into arrays on the stack
// or in the request rather than into two allocations per object. It works
// on values, not through a *members, so that such an array stays where it
// is (a store through a pointer would move it to the heap).
func splitMembers(raw []byte, list []member) (members, error) {
	list = list[:0]
	var index map[string]int
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return members{}, errNotObject
	}
	i = jsonscan.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return members{list: list}, nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return members{}, errNotObject
		}
		end := jsonscan.StringEnd(raw, i)
		key, err := memberKey(raw[i:end])
		if err != nil {
			return members{}, err
		}
		i = jsonscan.SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return members{}, errNotObject
		}
		i = jsonscan.SkipSpace(raw, i+1)
		vend := jsonscan.ValueEnd(raw, i)
		if vend <= i {
			return members{}, errNotObject
		}
		list, index = addMember(list, index, key, json.RawMessage(raw[i:vend]))
		i = jsonscan.SkipSpace(raw, vend)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case ',':
			i = jsonscan.SkipSpace(raw, i+1)
		case '}':
			return members{list: list, index: index}, nil
		default:
			return members{}, errNotObject
		}
	}
	return members{}, errNotObject
}

// member is one member of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

// members is a JSON object's members, each key once with its last value. The
// envelope splits five small objects per request; a map for each was most
// of the envelope's cost (allocation and hashing), so small objects are a
// list searched in order, and only an object with many members gets an
// index (a body of many thousand keys must not cost a search per key).
type members struct {
	list  []member
	index map[string]int // key -> position in list; nil while the list is short
}

// linearMembers is how many members an object may have before set indexes
// them.
const linearMembers = 16

func (m *members) find(key string) int {
	if m.index != nil {
		if i, ok := m.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range m.list {
		if m.list[i].key == key {
			return i
		}
	}
	return -1
}

func (m *members) set(key string, val json.RawMessage) {
	m.list, m.index = addMember(m.list, m.index, key, val)
}

// addMember is set on a members' two fields as values.
func addMember(list []member, index map[string]int, key string, val json.RawMessage) ([]member, map[string]int) {
	if i := (&members{list, index}).find(key); i >= 0 {
		list[i].val = val // a repeated key keeps its last value
		return list, index
	}
	list = append(list, member{key, val})
	switch {
	case index != nil:
		index[key] = len(list) - 1
	case len(list) > linearMembers:
		index = make(map[string]int, 2*len(list))
		for i, e := range list {
			index[e.key] = i
		}
	}
	return list, index
}

// get returns the value of key and whether the object has it.
func (m *members) get(key string) (json.RawMessage, bool) {
	if i := m.find(key); i >= 0 {
		return m.list[i].val, true
	}
	return nil, false
}

// val returns the value of key, nil when absent.
func (m *members) val(key string) json.RawMessage { v, _ := m.get(key); return v }

// len is the number of distinct keys.
func (m *members) len() int { return len(m.list) }

// memberKey is unquoteString for a key: a key that needs no unescaping is
// not copied (it aliases the body, which outlives the members).
func memberKey(q []byte) (string, error) {
	if len(q) < 2 || q[len(q)-1] != '"' {
		return "", errNotObject
	}
	body := q[1 : len(q)-1]
	if len(body) > 0 && bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return unsafe.String(&body[0], len(body)), nil
	}
	return unquoteString(q)
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

// plainBody returns the text of raw, a JSON string value, when it needs no
// unescaping (no backslash, valid UTF-8): its bytes between the quotes, as
// unquoteString would return them. ok is false for anything else.
func plainBody(raw []byte) (body []byte, ok bool) {
	q := bytes.TrimSpace(raw)
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return nil, false
	}
	body = q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
		return nil, false
	}
	return body, true
}

// stringIs reports whether stringOf(raw) == s, without making the string
// when raw needs no unescaping.
func stringIs(raw []byte, s string) bool {
	if body, ok := plainBody(raw); ok {
		return string(body) == s
	}
	return stringOf(raw) == s
}

// internedString is stringOf(raw), but a string that table holds is
// returned as table's copy: the names every request sends (its method, its
// tool) cost no allocation.
func internedString(raw []byte, table map[string]string) string {
	if body, ok := plainBody(raw); ok {
		if s, ok := table[string(body)]; ok {
			return s
		}
	}
	return stringOf(raw)
}
