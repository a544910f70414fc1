package present

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestEncodeFrame(t *testing.T) {
	const pre = `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":`
	tests := []struct {
		name   string
		params string
		id     json.RawMessage
		want   string
	}{
		{"number id is spliced first and stays a number", `{"taskId":"t1","status":"working"}`, json.RawMessage(`42`),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":42},"taskId":"t1","status":"working"}}` + "\n\n"},
		{"string id stays a string", `{"taskId":"t1"}`, json.RawMessage(`"abc-1"`),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":"abc-1"},"taskId":"t1"}}` + "\n\n"},
		{"empty params get only _meta", `{}`, json.RawMessage(`7`),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}` + "\n\n"},
		{"nil id adds no _meta", `{"taskId":"t1"}`, nil,
			pre + `{"taskId":"t1"}}` + "\n\n"},
		{"nil id and empty params", `{}`, nil,
			pre + `{}}` + "\n\n"},
		{"missing params become an empty object", ``, json.RawMessage(`1`),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}` + "\n\n"},
		{"indented params and id are compacted onto one line", "{\n  \"a\": [1, 2],\r\n  \"b\": \"x\"\n}\n", json.RawMessage(" 3 \n"),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":3},"a":[1,2],"b":"x"}}` + "\n\n"},
		{"params that are not an object become {}", `[1,2]`, json.RawMessage(`1`),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}` + "\n\n"},
		{"invalid params become {}", "{\"a\":\n", nil,
			pre + `{}}` + "\n\n"},
		{"an id that is not JSON is sent as a string", `{}`, json.RawMessage("x\ny"),
			pre + `{"_meta":{"io.modelcontextprotocol/subscriptionId":"x\ny"}}}` + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(EncodeFrame(MethodTaskStatus, json.RawMessage(tt.params), tt.id))
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEncodeData(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"final result is compacted", "{\"jsonrpc\": \"2.0\",\n \"id\": 42, \"result\": {\"resultType\": \"complete\"}}",
			`data: {"jsonrpc":"2.0","id":42,"result":{"resultType":"complete"}}` + "\n\n"},
		{"invalid JSON keeps one line", "{\"a\":\r\n", "data: {\"a\":  \n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(EncodeData(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSpliceMatchesEncodeFrame pins that the hub's shared-frame path (encode
// once, splice _meta per stream) yields the same bytes as EncodeFrame.
func TestSpliceMatchesEncodeFrame(t *testing.T) {
	for _, params := range []string{`{}`, `{"a":1}`, ` { "a" : { "b" : [ ] } } `} {
		for _, id := range []json.RawMessage{nil, json.RawMessage(`5`), json.RawMessage(`"s"`)} {
			f, _ := newFrame(MethodTaskStatus, json.RawMessage(params))
			got := f.AppendTo(nil, appendMeta(nil, id))
			if want := EncodeFrame(MethodTaskStatus, json.RawMessage(params), id); !bytes.Equal(got, want) {
				t.Errorf("params %s id %s: splice %q, EncodeFrame %q", params, id, got, want)
			}
		}
	}
}

func FuzzEncodeFrame(f *testing.F) {
	f.Add([]byte(`{"taskId":"t1","status":"working"}`), []byte(`42`))
	f.Add([]byte(`{}`), []byte(`"abc"`))
	f.Add([]byte(`{}`), []byte(nil))
	f.Add([]byte("{\n\"a\":\"\\n\"}"), []byte(`-1.5e3`))
	f.Add([]byte(`[]`), []byte(`{}`))
	f.Add([]byte("\r\n"), []byte("\n"))
	f.Fuzz(func(t *testing.T, params, id []byte) {
		var rid json.RawMessage
		if id != nil {
			rid = json.RawMessage(id)
		}
		out := EncodeFrame(MethodTaskStatus, json.RawMessage(params), rid)
		if !bytes.HasPrefix(out, []byte("data: ")) || !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("bad framing: %q", out)
		}
		body := out[len("data: ") : len(out)-2]
		if bytes.ContainsAny(body, "\r\n") {
			t.Fatalf("line break inside the event: %q", out)
		}
		if !isJSONObject(params) || (len(bytes.TrimSpace(id)) > 0 && !isJSONIDValue(id)) {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON for valid input: %q", body)
		}
		var got struct {
			JSONRPC string                     `json:"jsonrpc"`
			Method  string                     `json:"method"`
			Params  map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("decoding %q: %v", body, err)
		}
		if got.JSONRPC != "2.0" || got.Method != MethodTaskStatus {
			t.Fatalf("envelope changed: %q", body)
		}
		var in map[string]json.RawMessage
		_ = json.Unmarshal(params, &in)
		if _, has := in["_meta"]; has {
			return // callers must not send _meta; nothing more to check
		}
		meta, hasMeta := got.Params["_meta"]
		delete(got.Params, "_meta")
		if len(bytes.TrimSpace(id)) == 0 {
			if hasMeta {
				t.Fatalf("_meta without an id: %q", body)
			}
		} else {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(meta, &m); err != nil {
				t.Fatalf("_meta %q: %v", meta, err)
			}
			var c bytes.Buffer
			_ = json.Compact(&c, id)
			if !bytes.Equal(m[SubscriptionIDKey], c.Bytes()) {
				t.Fatalf("subscriptionId %s, want %s", m[SubscriptionIDKey], c.Bytes())
			}
		}
		if !jsonEqualMembers(got.Params, in) {
			t.Fatalf("params changed: in %q out %q", params, body)
		}
	})
}

func isJSONObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return json.Valid(t) && len(t) > 0 && t[0] == '{'
}

func isJSONIDValue(b []byte) bool {
	t := bytes.Trim(b, " \t\r\n") // JSON's own whitespace only; \v is not JSON
	return json.Valid(t) && len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))
}

func jsonEqualMembers(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		var x, y any
		if json.Unmarshal(av, &x) != nil || json.Unmarshal(b[k], &y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

var benchParams = json.RawMessage(`{"taskId":"task_01J9ZK3M4N5P6Q7R8S9T0V1W2X","status":"input_required","createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:05:00Z","ttlMs":3600000,"statusMessage":"waiting for review of section 2","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Accept the handoff?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}}}`)

// BenchmarkEncodeFrame is the cost of encoding one notification from scratch
// (what a per-subscriber encode would pay for every stream).
func BenchmarkEncodeFrame(b *testing.B) {
	id := json.RawMessage(`42`)
	b.SetBytes(int64(len(benchParams)))
	b.ReportAllocs()
	for b.Loop() {
		_ = EncodeFrame(MethodTaskStatus, benchParams, id)
	}
}

// BenchmarkSpliceFrame is what each stream pays instead: copying the shared
// encoding with its own pre-built _meta into its write buffer.
func BenchmarkSpliceFrame(b *testing.B) {
	f, _ := newFrame(MethodTaskStatus, benchParams)
	meta := appendMeta(nil, json.RawMessage(`42`))
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(benchParams)))
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendTo(buf[:0], meta)
	}
	if !strings.HasPrefix(string(buf), "data: ") {
		b.Fatal("bad frame")
	}
}

func TestEncodeFrame_ParamsWithTheirOwnMeta(t *testing.T) {
	cases := []struct {
		name, params, id, want string
	}{
		{"id joins the existing _meta", `{"taskId":"t1","_meta":{"commonroom/handoff_id":"h1"},"status":"working"}`, `42`,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":42,"commonroom/handoff_id":"h1"},"status":"working","taskId":"t1"}}`},
		{"empty _meta", `{"_meta":{},"a":1}`, `"s"`,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"},"a":1}}`},
		{"only _meta", `{"_meta":{"k":true}}`, `7`,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7,"k":true}}}`},
		{"no id keeps the _meta as it was", `{"_meta":{"k":true},"a":1}`, ``,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"k":true},"a":1}}`},
		{"_meta that is not an object is replaced", `{"_meta":5,"a":1}`, `1`,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"a":1}}`},
		{"_meta only inside a member is not top level", `{"x":{"_meta":{"k":1}}}`, `1`,
			`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"x":{"_meta":{"k":1}}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var id json.RawMessage
			if tc.id != "" {
				id = json.RawMessage(tc.id)
			}
			got := string(EncodeFrame("m", json.RawMessage(tc.params), id))
			if want := "data: " + tc.want + "\n\n"; got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(got[len("data: "):]), &v); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
		})
	}
}
