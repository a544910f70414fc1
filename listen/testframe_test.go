package listen

import (
	"bytes"
	"encoding/json"
)

// testChange is what the tests publish: a method and a params object, which
// the test encoder spells the way the MCP door does for the cases the tests
// need (a flat params object, the stream's tag as its first _meta member),
// so the test client reads real-looking notifications without this package
// knowing any protocol.
type testChange struct {
	method string
	params json.RawMessage
}

// testFrame is testEncode's Frame: the encoding split just inside params,
// where each stream splices its tag.
type testFrame struct {
	head, tail []byte // head ends with params' '{'; tail is the rest
}

func (f *testFrame) AppendTo(dst, tag []byte) []byte {
	dst = append(dst, f.head...)
	if tag != nil {
		dst = append(dst, `"_meta":{`...)
		dst = append(dst, tag...)
		dst = append(dst, '}')
		if f.tail[0] != '}' {
			dst = append(dst, ',')
		}
	}
	return append(dst, f.tail...)
}

// newTestFrame encodes one notification; params that are not a compact-able
// JSON object become {} and ok is false.
func newTestFrame(method string, params json.RawMessage) (*testFrame, bool) {
	var b bytes.Buffer
	b.WriteString(`data: {"jsonrpc":"2.0","method":"` + method + `","params":`)
	at := b.Len()
	ok := json.Compact(&b, params) == nil && b.Len() > at && b.Bytes()[at] == '{'
	if !ok {
		b.Truncate(at)
		b.WriteString("{}")
	}
	b.WriteString("}\n\n")
	buf := b.Bytes()
	return &testFrame{head: buf[:at+1], tail: buf[at+1:]}, ok
}

// testEncode is the tests' Config.Encode.
func testEncode(m Message) (Frame, bool) {
	c, ok := m.Change.(testChange)
	if !ok {
		return nil, false
	}
	return newTestFrame(c.method, c.params)
}

// testTag is a stream's tag: the subscription id member that goes into _meta.
func testTag(id string) []byte {
	if id == "" {
		return nil
	}
	return []byte(`"` + subIDKey + `":` + id)
}

// testFrameBytes is a notification as a stream with the given id writes it.
func testFrameBytes(method, params, id string) []byte {
	f, _ := newTestFrame(method, json.RawMessage(params))
	return f.AppendTo(nil, testTag(id))
}

// testData frames a compact JSON response the way the door frames the final
// result.
func testData(v string) []byte { return []byte("data: " + v + "\n\n") }
