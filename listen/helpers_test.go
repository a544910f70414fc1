package listen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

const (
	ackMethod  = "notifications/subscriptions/acknowledged"
	subIDKey   = "io.modelcontextprotocol/subscriptionId"
	testMethod = "notifications/tasks"
)

// rpc is a decoded JSON-RPC message as a client sees it on the stream. The
// bodies are decoded in the same pass, so large frames are scanned once.
type rpc struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *rpcBody        `json:"params"`
	Result  *rpcBody        `json:"result"`
}

// rpcBody is the part of params or result the tests look at.
type rpcBody struct {
	Meta       map[string]json.RawMessage `json:"_meta"`
	Seq        *int                       `json:"seq"`
	ResultType string                     `json:"resultType"`
}

func (m rpc) isFinal() bool { return m.Result != nil }

func (m rpc) body() *rpcBody {
	if m.Result != nil {
		return m.Result
	}
	if m.Params != nil {
		return m.Params
	}
	return &rpcBody{}
}

// subscriptionID returns _meta[subscriptionId] from params or result.
func (m rpc) subscriptionID() json.RawMessage { return m.body().Meta[subIDKey] }

// seq returns params.seq, the tests' way of numbering published messages.
func (m rpc) seq() int {
	if m.Params == nil || m.Params.Seq == nil {
		return -1
	}
	return *m.Params.Seq
}

// sseEvent is one server-sent event, or one comment line.
type sseEvent struct {
	comment string
	data    []byte
}

// sseReader is the test's own SSE client: it parses data: lines and comments
// the way a browser EventSource would for our single-line events.
type sseReader struct {
	br *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

func (r *sseReader) next() (sseEvent, error) {
	var data []byte
	have := false
	for {
		line, err := r.br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0:
			if have {
				return sseEvent{data: data}, nil
			}
		case line[0] == ':':
			return sseEvent{comment: strings.TrimSpace(string(line[1:]))}, nil
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if have {
				data = append(data, '\n')
			}
			data = append(data, v...)
			have = true
		}
	}
}

// nextMessage skips comments and decodes the next event as JSON-RPC.
func (r *sseReader) nextMessage() (rpc, error) {
	for {
		ev, err := r.next()
		if err != nil {
			return rpc{}, err
		}
		if ev.comment != "" {
			continue
		}
		var m rpc
		if err := json.Unmarshal(ev.data, &m); err != nil {
			return rpc{}, fmt.Errorf("bad event %q: %w", trunc(ev.data), err)
		}
		return m, nil
	}
}

func trunc(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// streamEnd is what the test handler reports when Serve returns.
type streamEnd struct {
	session, key string
	reason       EndReason
}

// testServer serves subscriptions over a real HTTP server on 127.0.0.1:0.
// GET /listen?session=&id=<raw JSON id>&topics=a,b&q=<queue len>
type testServer struct {
	t    testing.TB
	hub  *Hub
	srv  *httptest.Server
	ends chan streamEnd

	mu   sync.Mutex
	subs map[string]*Subscription // session + "\x00" + key
	// inPlace serves with Serve on the handler's goroutine instead of
	// ServeDetached.
	inPlace bool
	// returned gets the session of every stream handler that returned.
	returned chan string
}

func newTestServer(t testing.TB, cfg Config) *testServer {
	return newTestServerHooks(t, cfg, hooks{})
}

// newTestServerHooks is newTestServer with test hooks on the hub. The server
// records each connection (ConnContext), as ce serve does, so streams probe
// their sockets.
func newTestServerHooks(t testing.TB, cfg Config, hk hooks) *testServer {
	t.Helper()
	if cfg.Encode == nil {
		cfg.Encode = testEncode
	}
	ts := &testServer{
		t:        t,
		hub:      newHub(cfg, hk),
		ends:     make(chan streamEnd, 4096),
		returned: make(chan string, 4096),
		subs:     make(map[string]*Subscription),
	}
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serveHTTP))
	ts.srv.Config.ConnContext = ConnContext
	ts.srv.Start()
	t.Cleanup(func() {
		ts.hub.Close()
		ts.srv.CloseClientConnections()
		ts.srv.Close()
	})
	return ts
}

func (ts *testServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	session, id := q.Get("session"), q.Get("id")
	var topics []string
	if v := q.Get("topics"); v != "" {
		topics = strings.Split(v, ",")
	}
	qlen, _ := strconv.Atoi(q.Get("q"))
	defer func() {
		select {
		case ts.returned <- session:
		default:
		}
	}()
	sub, err := ts.hub.Subscribe(SubscribeRequest{Session: session, Key: id, Topics: topics, QueueLen: qlen})
	if err != nil {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	ts.mu.Lock()
	ts.subs[session+"\x00"+id] = sub
	ts.mu.Unlock()
	var opts ServeOptions
	if id != "" {
		opts.Tag = testTag(id)
		opts.Final = testData(`{"jsonrpc":"2.0","id":` + id +
			`,"result":{"resultType":"complete","_meta":{"` + subIDKey + `":` + id + `}}}`)
	}
	opts.First = testFrameBytes(ackMethod, `{"notifications":{}}`, id)
	end := func(reason EndReason) { ts.ends <- streamEnd{session: session, key: id, reason: reason} }
	if ts.inPlace {
		end(sub.Serve(w, r, opts))
		return
	}
	sub.ServeDetached(w, r, opts, end)
}

func (ts *testServer) sub(session, key string) *Subscription {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.subs[session+"\x00"+key]
}

// clientStream is one open listen stream on the client side.
type clientStream struct {
	session, id string
	conn        net.Conn
	*sseReader
}

func (c *clientStream) close() { c.conn.Close() }

// open starts a stream over its own TCP connection and reads its
// acknowledgement, after which the subscription is registered (the handler
// subscribes before writing it).
func (ts *testServer) open(ctx context.Context, session, id string, topics []string, qlen int) (*clientStream, error) {
	return ts.openDialer(ctx, &net.Dialer{}, session, id, topics, qlen)
}

// openDialer is open over a connection made by d (for socket options).
func (ts *testServer) openDialer(ctx context.Context, d *net.Dialer, session, id string, topics []string, qlen int) (*clientStream, error) {
	u := ts.srv.URL + "/listen?" + url.Values{
		"session": {session},
		"id":      {id},
		"topics":  {strings.Join(topics, ",")},
		"q":       {strconv.Itoa(qlen)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	conn, err := d.DialContext(ctx, "tcp", ts.srv.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*clientStream, error) {
		stop()
		conn.Close()
		return nil, err
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("status %d", resp.StatusCode))
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			return fail(fmt.Errorf("header %s = %q, want %q", k, got, want))
		}
	}
	// A detached stream's connection is closed at its end, so its answer
	// must tell the client not to reuse it.
	if sock.DetachSupported && !ts.inPlace && !resp.Close {
		return fail(fmt.Errorf("a detached stream's answer does not say Connection: close"))
	}
	c := &clientStream{session: session, id: id, conn: conn, sseReader: newSSEReader(resp.Body)}
	ack, err := c.nextMessage()
	if err != nil {
		return fail(fmt.Errorf("reading ack: %w", err))
	}
	if ack.Method != ackMethod {
		return fail(fmt.Errorf("first frame %q, want ack", ack.Method))
	}
	if err := c.checkID(ack); err != nil {
		return fail(err)
	}
	return c, nil
}

func (ts *testServer) mustOpen(ctx context.Context, session, id string, topics []string, qlen int) *clientStream {
	ts.t.Helper()
	c, err := ts.open(ctx, session, id, topics, qlen)
	if err != nil {
		ts.t.Fatalf("open %s/%s: %v", session, id, err)
	}
	ts.t.Cleanup(c.close)
	return c
}

// openMany opens n streams concurrently; spec(i) gives each its parameters.
func (ts *testServer) openMany(ctx context.Context, n int, spec func(i int) (session, id string, topics []string)) []*clientStream {
	ts.t.Helper()
	out := make([]*clientStream, n)
	errs := make([]error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				s, id, topics := spec(i)
				out[i], errs[i] = ts.open(ctx, s, id, topics, 0)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	ts.t.Cleanup(func() {
		for _, c := range out {
			if c != nil {
				c.close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		ts.t.Fatalf("opening %d streams: %v", n, err)
	}
	return out
}

// checkID verifies the frame's subscriptionId is the stream's id byte for
// byte, which also pins its JSON type (number vs string).
func (c *clientStream) checkID(m rpc) error {
	got := m.subscriptionID()
	if c.id == "" {
		if got != nil {
			return fmt.Errorf("stream without id got subscriptionId %s", got)
		}
		return nil
	}
	if string(got) != c.id {
		return fmt.Errorf("subscriptionId = %s, want %s", got, c.id)
	}
	if m.isFinal() && string(m.ID) != c.id {
		return fmt.Errorf("final id = %s, want %s", m.ID, c.id)
	}
	return nil
}

// expectSeqs reads notifications and checks they carry exactly these seqs.
func (c *clientStream) expectSeqs(seqs ...int) error {
	for _, want := range seqs {
		m, err := c.nextMessage()
		if err != nil {
			return fmt.Errorf("stream %s/%s waiting for seq %d: %w", c.session, c.id, want, err)
		}
		if m.isFinal() || m.Method != testMethod {
			return fmt.Errorf("stream %s/%s: got %q (final %v), want seq %d", c.session, c.id, m.Method, m.isFinal(), want)
		}
		if got := m.seq(); got != want {
			return fmt.Errorf("stream %s/%s: seq %d, want %d", c.session, c.id, got, want)
		}
		if err := c.checkID(m); err != nil {
			return fmt.Errorf("stream %s/%s: %w", c.session, c.id, err)
		}
	}
	return nil
}

// expectFinal reads the graceful final result, then the end of the body.
func (c *clientStream) expectFinal() error {
	m, err := c.nextMessage()
	if err != nil {
		return fmt.Errorf("stream %s/%s waiting for final: %w", c.session, c.id, err)
	}
	if !m.isFinal() {
		return fmt.Errorf("stream %s/%s: got %s, want final result", c.session, c.id, m.Method)
	}
	if err := c.checkID(m); err != nil {
		return err
	}
	if m.Result.ResultType != "complete" {
		return fmt.Errorf("final resultType %q", m.Result.ResultType)
	}
	if _, err := c.next(); err != io.EOF {
		return fmt.Errorf("after final: %v, want EOF", err)
	}
	return nil
}

// expectDroppedEnd reads to the end of the body and fails if the final result
// ever appears: a dropped stream must end without it.
func (c *clientStream) expectDroppedEnd() error {
	for {
		ev, err := c.next()
		if err != nil {
			return nil // EOF or a reset: either way, no final frame
		}
		if bytes.HasPrefix(ev.data, []byte(`{"jsonrpc":"2.0","id":`)) {
			return fmt.Errorf("dropped stream %s/%s got the final frame", c.session, c.id)
		}
	}
}

// cancelGracefully cancels the stream session/key through the hub and checks
// it ends as a cancel must: the client reads the final result and then the
// end of the body, and the handler reports that very stream cancelled.
func (ts *testServer) cancelGracefully(ctx context.Context, t *testing.T, c *clientStream, session, key string) {
	t.Helper()
	if !ts.hub.Cancel(session, key) {
		t.Fatalf("Cancel(%s, %s) matched nothing", session, key)
	}
	if err := c.expectFinal(); err != nil {
		t.Fatal(err)
	}
	if e := ts.waitEnd(ctx); e.session != session || e.key != key || e.reason != EndCancelled {
		t.Fatalf("end %+v, want %s/%s cancelled", e, session, key)
	}
}

// waitEnd returns the next stream end reported by the handler.
func (ts *testServer) waitEnd(ctx context.Context) streamEnd {
	ts.t.Helper()
	select {
	case e := <-ts.ends:
		return e
	case <-ctx.Done():
		ts.t.Fatalf("waiting for a stream to end: %v", ctx.Err())
		return streamEnd{}
	}
}

func msg(topic string, seq int) Message {
	return Message{Topic: topic, Change: testChange{testMethod, json.RawMessage(`{"seq":` + strconv.Itoa(seq) + `}`)}}
}

func bigMsg(topic string, seq, size int) Message {
	return Message{Topic: topic, Change: testChange{testMethod,
		json.RawMessage(`{"seq":` + strconv.Itoa(seq) + `,"blob":"` + strings.Repeat("x", size) + `"}`)}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fakeWriter is an in-memory ResponseWriter for tests inside a synctest
// bubble, where real sockets are not allowed. If gate is set, every Flush
// waits for a value on it (or for it to be closed), which lets a test hold
// the writer mid-flush.
type fakeWriter struct {
	mu      sync.Mutex
	hdr     http.Header
	code    int
	buf     bytes.Buffer
	flushes int
	gate    chan struct{}
}

func newFakeWriter() *fakeWriter { return &fakeWriter{hdr: make(http.Header)} }

func (f *fakeWriter) Header() http.Header { return f.hdr }

func (f *fakeWriter) WriteHeader(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.code == 0 {
		f.code = code
	}
}

func (f *fakeWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.code == 0 {
		f.code = http.StatusOK
	}
	return f.buf.Write(p)
}

func (f *fakeWriter) Flush() {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	f.flushes++
	f.mu.Unlock()
}

func (f *fakeWriter) output() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String(), f.flushes
}
