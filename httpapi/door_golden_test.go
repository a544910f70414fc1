package httpapi

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateDoorGolden = flag.Bool("update-door-golden", false, "rewrite testdata/door_golden.txt from this build")

// TestDoorAnswersAreAsRecorded: the front door's answers to a fixed run of
// requests over a real listener — a lifecycle (handoff_create with and
// without the Tasks extension, accept, complete, approve, handoff_get) and
// bad input at each step of the envelope and of the tools (malformed JSON,
// wrong types, oversize, unknown ids and tools, missing capability, no or a
// wrong session), on /mcp and on the plain routes — are byte for byte the
// ones recorded in testdata/door_golden.txt: status, the headers a client
// sees (Content-Type, Content-Length, chunking, WWW-Authenticate,
// Retry-After, Connection) and the body. The ids and times the room makes
// up are numbered in order of appearance, so a change in which id an answer
// names still shows. The file was recorded from the build before issue 17's
// work on the door's cost (BASE 1b3b1ae, -update-door-golden); issue 24
// appended the task twins' answers at its end.
func TestDoorAnswersAreAsRecorded(t *testing.T) {
	h := newHarness(t, "")
	boss := h.join("boss", "read", "observe", "propose", "checkout", "commit", "approve")
	worker := h.join("worker", "read", "checkout")
	const proto = "2026-07-28"
	meta := func(tasks bool) string {
		caps := `{}`
		if tasks {
			caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
		}
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + proto + `","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	call := func(id, tool, args string, tasks bool) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta(tasks) + `}}`
	}
	var out bytes.Buffer
	ids := newIDNumbering()
	send := func(name, method, path, token string, headers map[string]string, body string) string {
		t.Helper()
		req, err := http.NewRequest(method, h.IngressURL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header[k] = []string{v}
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		norm := ids.normalize(string(b))
		fmt.Fprintf(&out, "=== %s\nstatus %d\ncontent-length %d chunked %v close %v\n", name, resp.StatusCode, resp.ContentLength,
			len(resp.TransferEncoding) > 0, resp.Close)
		for _, k := range []string{"Content-Type", "Www-Authenticate", "Retry-After", "Allow"} {
			if v, ok := resp.Header[k]; ok {
				fmt.Fprintf(&out, "%s: %q\n", k, v)
			}
		}
		fmt.Fprintf(&out, "%s\n", norm)
		return string(b)
	}
	mcpHeaders := func(method, name string) map[string]string {
		m := map[string]string{"MCP-Protocol-Version": proto, "Mcp-Method": method}
		if name != "" {
			m["Mcp-Name"] = name
		}
		return m
	}
	post := func(name, token, method, nameHdr, body string) string {
		return send(name, http.MethodPost, "/mcp", token, mcpHeaders(method, nameHdr), body)
	}

	// The lifecycle, as the bench drives it, and its plain-result form.
	created := post("create as a task", boss.SessionToken, "tools/call", "handoff_create",
		call(`1`, "handoff_create", `{"summary":"golden <work> & \"more\"","assignee":"`+worker.ParticipantID+`"}`, true))
	hid := regexp.MustCompile(`handoff_[0-9a-f]+`).FindString(created)
	if hid == "" {
		t.Fatalf("handoff_create: no handoff id in %s", created)
	}
	post("create without the extension", boss.SessionToken, "tools/call", "handoff_create",
		call(`"two"`, "handoff_create", `{"summary":"plain","idempotency_key":"k1"}`, false))
	post("create replayed", boss.SessionToken, "tools/call", "handoff_create",
		call(` 3 `, "handoff_create", `{"summary":"plain","idempotency_key":"k1"}`, false))
	post("accept", worker.SessionToken, "tools/call", "handoff_accept", call(`4`, "handoff_accept", `{"handoff_id":"`+hid+`"}`, true))
	post("complete", worker.SessionToken, "tools/call", "handoff_complete",
		call(`"\u0035<&>"`, "handoff_complete", `{"handoff_id":"`+hid+`","result":{"text":"done \u2028 <b>","artifacts":[]}}`, true))
	post("get", boss.SessionToken, "tools/call", "handoff_get", call(`6`, "handoff_get", `{"handoff_id":"`+hid+`"}`, false))
	post("approve by the assignee is refused", worker.SessionToken, "tools/call", "handoff_approve",
		call(`7`, "handoff_approve", `{"handoff_id":"`+hid+`"}`, false))
	post("approve", boss.SessionToken, "tools/call", "handoff_approve", call(`8`, "handoff_approve", `{"handoff_id":"`+hid+`","note":"ok"}`, false))
	post("approve again", boss.SessionToken, "tools/call", "handoff_approve", call(`9`, "handoff_approve", `{"handoff_id":"`+hid+`"}`, false))
	post("escaped tool name", boss.SessionToken, "tools/call", "handoff_get",
		`{"jsonrpc":"2.0","id":10,"method":"tools\u002fcall","params":{"name":"handoff\u005fget","arguments":{"handoff_id":"`+hid+`"},`+meta(false)+`}}`)

	// Bad input at the envelope.
	post("malformed JSON", boss.SessionToken, "tools/call", "handoff_get", `{"jsonrpc":"2.0","id":11,`)
	post("a batch", boss.SessionToken, "tools/call", "handoff_get", `[`+call(`12`, "handoff_get", `{}`, false)+`]`)
	post("jsonrpc 1.0", boss.SessionToken, "tools/call", "handoff_get", strings.Replace(call(`13`, "handoff_get", `{}`, false), `"2.0"`, `"1.0"`, 1))
	post("a notification", boss.SessionToken, "notifications/initialized", "", `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	send("no protocol version header", http.MethodPost, "/mcp", boss.SessionToken, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "handoff_get"},
		call(`14`, "handoff_get", `{}`, false))
	post("no _meta", boss.SessionToken, "tools/call", "handoff_get", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"handoff_get"}}`)
	post("Mcp-Method mismatch", boss.SessionToken, "tools/list", "", call(`16`, "handoff_get", `{}`, false))
	post("Mcp-Name mismatch", boss.SessionToken, "tools/call", "handoff_list", call(`17`, "handoff_get", `{}`, false))
	post("unsupported version", boss.SessionToken, "tools/call", "handoff_get", strings.Replace(call(`18`, "handoff_get", `{}`, false), proto+`"`, `1999-01-01"`, 1))
	send("unsupported version in both", http.MethodPost, "/mcp", boss.SessionToken,
		map[string]string{"MCP-Protocol-Version": "1999-01-01", "Mcp-Method": "tools/call", "Mcp-Name": "handoff_get"},
		strings.Replace(call(`19`, "handoff_get", `{}`, false), proto+`"`, `1999-01-01"`, 1))
	post("unknown method", boss.SessionToken, "tools/nope", "", `{"jsonrpc":"2.0","id":20,"method":"tools/nope","params":{`+meta(false)+`}}`)
	post("oversize body", boss.SessionToken, "tools/call", "handoff_get",
		call(`21`, "handoff_get", `{"pad":"`+strings.Repeat("a", 1<<20)+`"}`, false))

	// Bad input at the tools.
	post("unknown tool", boss.SessionToken, "tools/call", "handoff_nope", call(`22`, "handoff_nope", `{}`, false))
	post("wrong argument type", worker.SessionToken, "tools/call", "handoff_accept", call(`23`, "handoff_accept", `{"handoff_id":5}`, false))
	post("nested wrong type", worker.SessionToken, "tools/call", "handoff_complete", call(`24`, "handoff_complete", `{"handoff_id":"`+hid+`","result":{"text":1}}`, false))
	post("arguments not an object", worker.SessionToken, "tools/call", "handoff_accept", call(`25`, "handoff_accept", `[1]`, false))
	post("arguments null", worker.SessionToken, "tools/call", "handoff_accept", call(`26`, "handoff_accept", `null`, false))
	post("unknown handoff", worker.SessionToken, "tools/call", "handoff_accept", call(`27`, "handoff_accept", `{"handoff_id":"handoff_0000"}`, false))
	post("missing capability", worker.SessionToken, "tools/call", "handoff_create", call(`28`, "handoff_create", `{"summary":"x"}`, false))
	post("unknown task", boss.SessionToken, "tasks/get", "task_0000",
		`{"jsonrpc":"2.0","id":29,"method":"tasks/get","params":{"taskId":"task_0000",`+meta(true)+`}}`)
	post("no session", "", "tools/call", "handoff_get", call(`30`, "handoff_get", `{"handoff_id":"`+hid+`"}`, false))
	post("a wrong session", "nope", "tools/call", "handoff_get", call(`31`, "handoff_get", `{"handoff_id":"`+hid+`"}`, false))

	// The plain routes.
	send("plain malformed JSON", http.MethodPost, "/workspace/handoff/accept", worker.SessionToken, nil, `{"handoff_id":`)
	send("plain wrong type", http.MethodPost, "/workspace/handoff/accept", worker.SessionToken, nil, `{"handoff_id":5}`)
	send("plain trailing data", http.MethodPost, "/workspace/handoff/accept", worker.SessionToken, nil, `{"handoff_id":"x"} {}`)
	send("plain unknown handoff", http.MethodPost, "/workspace/handoff/accept", worker.SessionToken, nil, `{"handoff_id":"handoff_0000"}`)
	send("plain oversize", http.MethodPost, "/workspace/handoff/accept", worker.SessionToken, nil, `{"pad":"`+strings.Repeat("a", 1<<20)+`"}`)
	send("plain read", http.MethodGet, "/workspace/handoff?handoff_id="+hid, boss.SessionToken, nil, ``)
	send("plain no session", http.MethodGet, "/workspace/handoff?handoff_id="+hid, "", nil, ``)

	// The task twins (issue 24), recorded after everything above so the
	// numbering of the earlier answers stays as it was.
	post("cancel by the assignee is refused", worker.SessionToken, "tools/call", "handoff_cancel",
		call(`32`, "handoff_cancel", `{"handoff_id":"`+hid+`"}`, false))
	post("cancel of a decided handoff changes nothing", boss.SessionToken, "tools/call", "handoff_cancel",
		call(`33`, "handoff_cancel", `{"handoff_id":"`+hid+`"}`, false))
	post("answer when nothing is asked", boss.SessionToken, "tools/call", "handoff_answer",
		call(`34`, "handoff_answer", `{"handoff_id":"`+hid+`","input_responses":{"q":{"action":"accept","content":{"answer":"x"}}}}`, false))
	asked := post("create to ask", boss.SessionToken, "tools/call", "handoff_create",
		call(`35`, "handoff_create", `{"summary":"ask me","assignee":"`+worker.ParticipantID+`"}`, false))
	hid2 := regexp.MustCompile(`handoff_[0-9a-f]+`).FindString(asked)
	post("accept to ask", worker.SessionToken, "tools/call", "handoff_accept", call(`36`, "handoff_accept", `{"handoff_id":"`+hid2+`"}`, false))
	post("ask", worker.SessionToken, "tools/call", "handoff_request_input",
		call(`37`, "handoff_request_input", `{"handoff_id":"`+hid2+`","requests":[{"key":"q","message":"which?"},{"key":"r","message":"why?"}]}`, false))
	post("answer that is not an object", boss.SessionToken, "tools/call", "handoff_answer",
		call(`38`, "handoff_answer", `{"handoff_id":"`+hid2+`","input_responses":{"q":"this"}}`, false))
	post("answer by the assignee is refused", worker.SessionToken, "tools/call", "handoff_answer",
		call(`39`, "handoff_answer", `{"handoff_id":"`+hid2+`","input_responses":{"q":{"action":"accept","content":{"answer":"x"}}}}`, false))
	post("answer one and an unasked key", boss.SessionToken, "tools/call", "handoff_answer",
		call(`40`, "handoff_answer", `{"handoff_id":"`+hid2+`","input_responses":{"q":{"action":"accept","content":{"answer":"this"}},"zz":{"action":"accept"}}}`, false))
	post("answer of an unknown handoff", boss.SessionToken, "tools/call", "handoff_answer",
		call(`41`, "handoff_answer", `{"handoff_id":"handoff_0000","input_responses":{"q":{"action":"accept"}}}`, false))
	send("plain answer wrong type", http.MethodPost, "/workspace/handoff/answer", boss.SessionToken, nil, `{"handoff_id":"`+hid2+`","input_responses":[1]}`)
	send("plain answer the other", http.MethodPost, "/workspace/handoff/answer", boss.SessionToken, nil,
		`{"handoff_id":"`+hid2+`","input_responses":{"r":{"action":"decline"}}}`)
	send("plain cancel unknown", http.MethodPost, "/workspace/handoff/cancel", boss.SessionToken, nil, `{"handoff_id":"handoff_0000"}`)
	post("cancel", boss.SessionToken, "tools/call", "handoff_cancel", call(`42`, "handoff_cancel", `{"handoff_id":"`+hid2+`"}`, false))
	send("plain cancel again", http.MethodPost, "/workspace/handoff/cancel", boss.SessionToken, nil, `{"handoff_id":"`+hid2+`"}`)

	path := filepath.Join("testdata", "door_golden.txt")
	if *updateDoorGolden {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := out.Bytes()
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("answers differ from %s at line %d:\ngot  %.500q\nwant %.500q", path, i+1, g, w)
			}
		}
	}
}

// idNumbering replaces the ids and times a room makes up by their number
// of first appearance.
type idNumbering struct {
	seen map[string]string
	re   *regexp.Regexp
}

func newIDNumbering() *idNumbering {
	return &idNumbering{seen: map[string]string{},
		re: regexp.MustCompile(`\b[a-z]+_[0-9A-Za-z_-]{16,}\b|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)}
}

func (n *idNumbering) normalize(s string) string {
	return n.re.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := n.seen[m]; ok {
			return r
		}
		kind := "time"
		if i := strings.IndexByte(m, '_'); i > 0 && !strings.Contains(m, ":") {
			kind = m[:i]
		}
		r := fmt.Sprintf("<%s %d>", kind, len(n.seen)+1)
		n.seen[m] = r
		return r
	})
}
