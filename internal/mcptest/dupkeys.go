package mcptest

import (
	"bytes"
	"encoding/json"
)

// DupKeys lists the keys that occur twice within one JSON object of doc, in
// order. A JSON decoder silently keeps one of them, so a server that writes
// a repeated key says two things and a client hears one.
func DupKeys(doc []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var dups []string
	type level struct {
		obj    bool
		keys   map[string]bool
		expect bool // the next string token in this object is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.obj {
					top.expect = true // the value is done once it closes
				}
				stack = append(stack, &level{obj: d == '{', keys: map[string]bool{}, expect: d == '{'})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top != nil && top.obj {
			if top.expect {
				k := tok.(string)
				if top.keys[k] {
					dups = append(dups, k)
				}
				top.keys[k] = true
				top.expect = false
			} else {
				top.expect = true
			}
		}
	}
}
