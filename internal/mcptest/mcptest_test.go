package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// seenRequest is what the test server received.
type seenRequest struct {
	header http.Header
	body   map[string]any
}

// testServer is a real HTTP server on 127.0.0.1:0 answering like a room
// would, enough to check what the client sends and how it reads answers.
func testServer(t *testing.T) (*httptest.Server, chan seenRequest) {
	t.Helper()
	seen := make(chan seenRequest, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		seen <- seenRequest{r.Header.Clone(), body}
		id, _ := json.Marshal(body["id"])
		switch r.Header.Get("Mcp-Method") {
		case "subscriptions/listen":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "event: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\n")
			fmt.Fprint(w, "id: 8\n\n") // no data: not an event
			fmt.Fprint(w, ": keep-alive\r\n\r\ndata: second\r\n\r\n")
			fmt.Fprint(w, "data: cut off")
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			isErr := r.Header.Get("Mcp-Name") == "broken"
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","isError":%v,"structuredContent":{"error":"conflict"}}}`, id, isErr)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, id)
		}
	})
	mux.HandleFunc("POST /session/join", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		if in["invite"] != "commonroom://join/x" {
			http.Error(w, `{"error":"invalid_invite"}`, 403)
			return
		}
		fmt.Fprintf(w, `{"session_token":"tok_%s","participant_id":"participant_1"}`, in["name"])
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, seen
}

func TestClientSendsWhatTheSpecRequires(t *testing.T) {
	s, seen := testServer(t)
	c := New(s.Client(), s.URL+"/mcp", "tok", false, "")
	ctx := context.Background()
	if _, err := c.Tool(ctx, "workspace_status", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	got := <-seen
	for k, want := range map[string]string{"Authorization": "Bearer tok", "Mcp-Protocol-Version": Version,
		"Mcp-Method": "tools/call", "Mcp-Name": "workspace_status", "Accept": Accept, "Content-Type": "application/json"} {
		if v := got.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if got.body["jsonrpc"] != "2.0" || got.body["id"] != float64(1) || got.body["method"] != "tools/call" {
		t.Errorf("envelope = %v", got.body)
	}
	meta, _ := got.body["params"].(map[string]any)["_meta"].(map[string]any)
	if meta[MetaVersion] != Version || meta[MetaCaps] == nil || meta[MetaInfo] == nil {
		t.Errorf("params._meta = %v, want version, capabilities and clientInfo", meta)
	}

	// The Tasks extension, a second id, and an isError result as a *ToolError.
	_, err := c.WithTasks(true).Tool(ctx, "broken", nil)
	var te *ToolError
	if !errors.As(err, &te) || te.Code != "conflict" {
		t.Fatalf("isError result: err = %v, want a *ToolError with code conflict", err)
	}
	got = <-seen
	caps := got.body["params"].(map[string]any)["_meta"].(map[string]any)[MetaCaps].(map[string]any)
	if _, ok := caps["extensions"].(map[string]any)[TasksExtension]; !ok || got.body["id"] != float64(2) {
		t.Errorf("WithTasks(true): id %v, capabilities %v", got.body["id"], caps)
	}

	// A JSON-RPC error is an *RPCError with the code; a notification has no id.
	_, err = c.Call(ctx, "nothing/here", nil)
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32601 || re.Status != 400 {
		t.Fatalf("error answer: err = %v, want an *RPCError -32601 on HTTP 400", err)
	}
	<-seen
	if _, err := c.Do(ctx, Request{ID: NoID, Method: "notifications/x", Meta: DropMeta}); err != nil {
		t.Fatal(err)
	}
	got = <-seen
	if _, has := got.body["id"]; has {
		t.Errorf("a notification carries an id: %v", got.body)
	}
	if _, has := got.body["params"].(map[string]any)["_meta"]; has {
		t.Errorf("DropMeta still sent _meta: %v", got.body)
	}
}

func TestStreamReadsFramesCommentsAndTheEnd(t *testing.T) {
	s, _ := testServer(t)
	c := New(s.Client(), s.URL+"/mcp", "tok", false, "")
	st, r, err := c.Open(context.Background(), Request{Method: "subscriptions/listen"}, "listen")
	if err != nil || st == nil {
		t.Fatalf("open: %v, %d %s", err, r.Status, r.Raw)
	}
	defer st.Close()
	st.Start()
	f := st.Wait(t, 5*time.Second)
	if f.Event != "message" || f.ID != "7" || string(f.Data) != "{\"a\":\n1}" {
		t.Errorf("first frame = %+v (%s)", f, f.Data)
	}
	f = st.Wait(t, 5*time.Second)
	if f.Event != "" || f.ID != "" || string(f.Data) != "second" {
		t.Errorf("second frame = %+v (%s)", f, f.Data)
	}
	if rest := st.WaitEnd(t, 5*time.Second); len(rest) != 0 {
		t.Errorf("frames after the end: %v", rest)
	}
	if st.Comments() != 2 || st.Partial() != len("data: cut off") {
		t.Errorf("comments %d, partial %d", st.Comments(), st.Partial())
	}

	// A wait past the end fails the test and says what the stream carried.
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); st.Wait(ft, time.Second) }()
	<-done
	if !strings.Contains(ft.msg, "ended") || !strings.Contains(ft.msg, "seen 2 frame(s) and 2 comment(s)") || !strings.Contains(ft.msg, "second") {
		t.Errorf("the failure does not say what was seen: %q", ft.msg)
	}
}

// fatalTB records a Fatal and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprint(args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestJoinManyAndItsRefusal(t *testing.T) {
	s, _ := testServer(t)
	ss, err := JoinMany(context.Background(), s.Client(), s.URL, "commonroom://join/x", "s%02d", "agent", 3)
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for _, x := range ss {
		toks = append(toks, x.SessionToken)
	}
	if !slices.Equal(toks, []string{"tok_s00", "tok_s01", "tok_s02"}) {
		t.Errorf("sessions = %v", toks)
	}
	if _, err := Join(context.Background(), s.Client(), s.URL, "nope", "x", ""); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a refused join: err = %v, want the 403", err)
	}
}

func TestDupKeys(t *testing.T) {
	for doc, want := range map[string][]string{
		`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`: nil,
		`{"a":1,"a":2}`: {"a"},
		`{"p":{"_meta":{},"x":"_meta","_meta":{}}}`: {"_meta"},
		`{"l":[{"k":"v","k":"w"}]}`:                 {"k"},
		`{"s":"k","k":["k","k"],"t":{"k":{"k":1}}}`: nil,
	} {
		if got := DupKeys([]byte(doc)); !slices.Equal(got, want) {
			t.Errorf("DupKeys(%s) = %q, want %q", doc, got, want)
		}
	}
}
