package mcp

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestTaskHandleBytesAreTheMapEncoding: the task handle written as bytes
// (createTaskRaw) is byte for byte what encoding createTaskResult's map
// sent, whatever the task and its _meta hold: HTML-unsafe and non-ASCII
// characters, U+2028, control bytes, invalid UTF-8, a _meta that names the
// server-info key itself (the server's wins), values of any type, no status
// message, and any request id.
func TestTaskHandleBytesAreTheMapEncoding(t *testing.T) {
	s := &Handler{version: "v<1>&\u2028\"\\"}
	meta, err := encodeNoHTML(nil, s.serverInfo())
	if err != nil {
		t.Fatal(err)
	}
	s.metaJSON = meta
	base := room.DetailedTask{TaskID: "task_1", Status: "working", CreatedAt: "2026-12-02T03:46:08.484Z",
		LastUpdatedAt: "2026-12-02T03:46:08.484Z", TTLMs: 86_400_000, PollIntervalMs: 5000,
		Meta: map[string]any{"commonroom/handoff_id": "handoff_be48"}}
	odd := "fix <b> & \"quote\" \\ é 😀\u2028\u2029\n\t\x01 \xff\xfe"
	tasks := map[string]room.DetailedTask{
		"the lifecycle's handle": base,
		"a status message":       with(base, func(d *room.DetailedTask) { d.StatusMessage = "waiting on input" }),
		"odd strings everywhere": with(base, func(d *room.DetailedTask) {
			d.TaskID, d.Status, d.StatusMessage, d.CreatedAt, d.LastUpdatedAt = odd, odd+"s", odd+"m", odd+"c", odd+"l"
			d.TTLMs, d.PollIntervalMs = -1, 0
		}),
		"a _meta of many kinds": with(base, func(d *room.DetailedTask) {
			d.Meta = map[string]any{"z": 1.5, "a": []any{nil, true, "<&>"}, "ü": map[string]any{"y": odd}, odd: json.RawMessage(` { "r" : 1 } `),
				"io.modelcontextprotocol/serverInfo!": "sorts after", "io.modelcontextprotocol": "sorts before", "": ""}
		}),
		"a _meta naming the server-info key": with(base, func(d *room.DetailedTask) {
			d.Meta = map[string]any{serverInfoKey: "the task's", "k": "v"}
		}),
		"no _meta":    with(base, func(d *room.DetailedTask) { d.Meta = nil }),
		"a long task": with(base, func(d *room.DetailedTask) { d.StatusMessage = strings.Repeat("\"\\x", 10_000) }),
	}
	for name, task := range tasks {
		for _, id := range []string{`7`, `"id <&>"`, ` 12 `} {
			t.Run(name+" with id "+id+" gives the same bytes", func(t *testing.T) {
				raw := s.createTaskRaw(task)
				if _, ok := raw.(rawResult); !ok {
					t.Fatalf("createTaskRaw gave %T, want the encoded bytes", raw)
				}
				got := httptest.NewRecorder()
				writeRPCResult(got, json.RawMessage(id), raw)
				want := httptest.NewRecorder()
				writeRPCResult(want, json.RawMessage(id), s.createTaskResult(task))
				if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("status %d, body\n%.600q\nwant status %d, body\n%.600q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
				}
			})
		}
	}
	t.Run("a _meta value that cannot be encoded fails as it did", func(t *testing.T) {
		task := with(base, func(d *room.DetailedTask) { d.Meta = map[string]any{"f": func() {}} })
		got := httptest.NewRecorder()
		writeRPCResult(got, json.RawMessage(`1`), s.createTaskRaw(task))
		want := httptest.NewRecorder()
		writeRPCResult(want, json.RawMessage(`1`), s.createTaskResult(task))
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || !bytes.Contains(got.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("body %q, want %q (an internal error)", got.Body.Bytes(), want.Body.Bytes())
		}
	})
}

// TestAppendJSONStringIsTheEncoders: appendJSONString writes what
// encoding/json does without HTML escaping, for every single byte and for
// strings mixing quotes, backslashes, control bytes and UTF-8.
func TestAppendJSONStringIsTheEncoders(t *testing.T) {
	cases := []string{"", "plain", `"`, `\`, `a"b\c"`, "<&>", "\x7f", "é", "\u2028", "\xff", "tab\there", "\x00", strings.Repeat(`{"k":"v\\"}`, 100)}
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+`"`)
	}
	for _, s := range cases {
		want, err := encodeNoHTML([]byte("prefix"), s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("prefix"), s); !bytes.Equal(got, want) {
			t.Errorf("string %q: got %q, want %q", s, got, want)
		}
		if got := appendJSONString([]byte("prefix"), []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("bytes %q: got %q, want %q", s, got, want)
		}
	}
}

// with is d changed by f (a copy: the map of d is shared unless f replaces it).
func with(d room.DetailedTask, f func(*room.DetailedTask)) room.DetailedTask {
	f(&d)
	return d
}
