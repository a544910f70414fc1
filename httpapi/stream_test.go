package httpapi

// Frames and streams: the kit's SSE reader (internal/roomtest: mcptest's
// reader with each frame decoded once as a JSON-RPC message and checked
// against the rules of its stream) under the names this package's tests
// have always used, plus what only these tests need: GET /workspace/observe,
// tasks/get compared with a task frame, and many streams at once. Nothing
// here sleeps: every wait is on a frame, the end of a stream, or a context
// deadline.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
)

// frameWait bounds every wait for a frame that must arrive.
const frameWait = roomtest.FrameWait

// stream is one open SSE response, frame is one decoded frame (the kit's).
type (
	stream = roomtest.Stream
	frame  = roomtest.Frame
)

var (
	streamClient  = roomtest.StreamClient
	openStream    = roomtest.OpenStream
	parseFrames   = roomtest.ParseFrames
	compactJSON   = roomtest.CompactJSON
	decodeStrings = roomtest.DecodeStrings
)

// sameTask checks that a notifications/tasks frame's params, without
// _meta.subscriptionId, equal a tasks/get result without resultType and
// _meta.serverInfo.
func sameTask(t testing.TB, f frame, get map[string]any) {
	t.Helper()
	params := withoutMeta(f.Params(), mcptest.MetaSubscriptionID)
	want := withoutMeta(get, mcptest.MetaServerInfo)
	delete(want, "resultType")
	if !reflect.DeepEqual(params, want) {
		a, _ := json.Marshal(params)
		b, _ := json.Marshal(want)
		t.Fatalf("notifications/tasks params differ from tasks/get:\n frame:     %s\n tasks/get: %s", a, b)
	}
}

// withoutMeta copies m without _meta[key], dropping _meta when it empties.
func withoutMeta(m map[string]any, key string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	if meta, ok := out["_meta"].(map[string]any); ok {
		c := map[string]any{}
		for k, v := range meta {
			if k != key {
				c[k] = v
			}
		}
		if len(c) == 0 {
			delete(out, "_meta")
		} else {
			out["_meta"] = c
		}
	}
	return out
}

// observe opens GET /workspace/observe?query as token and starts reading
// it; a refusal comes back as the plain answer it is.
func (h *roomHarness) observe(t testing.TB, token, query string) (*stream, apiResp) {
	t.Helper()
	return h.observeAt(t, h.IngressURL("/workspace/observe"), token, query, "observe "+query)
}

// observeAt is observe on url (either listener), as token ("" for none),
// with opts added to the request.
func (h *roomHarness) observeAt(t testing.TB, url, token, query, name string, opts ...reqOpt) (*stream, apiResp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if query != "" {
		url += "?" + query
	}
	req, err := mcptest.NewHTTPRequest(ctx, "GET", url, token, nil, append(opts, withHeader("Accept", "text/event-stream"))...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, r := openStream(t, nil, req, cancel, name)
	if s == nil {
		return nil, apiResp{Status: r.Status, Header: r.Header, Body: r.Raw}
	}
	s.Start()
	return s, apiResp{Status: http.StatusOK, Header: s.Header}
}

// listenURIs is listen on a client of its own following only uris (request
// id id); it returns the stream with the acknowledged URIs.
func (h *roomHarness) listenURIs(t testing.TB, token string, id int, uris []string) (*stream, []string) {
	t.Helper()
	s, acked := h.Listen(t, nil, token, strconv.Itoa(id), map[string]any{"resourceSubscriptions": uris}, false)
	return s, decodeStrings(t, acked["resourceSubscriptions"])
}

// sameSet compares two lists as sets and rejects duplicates in got.
func sameSet(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w) && len(slices.Compact(slices.Clone(g))) == len(g)
}

// eachStream runs f for every stream concurrently, each with its own deadline,
// and fails t with every error.
func eachStream(t testing.TB, streams []*stream, f func(ctx context.Context, s *stream) error) {
	t.Helper()
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			errs[i] = f(ctx, s)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		msg := err.Error()
		if len(msg) > 4000 {
			msg = msg[:4000] + "…"
		}
		t.Fatal(msg)
	}
}

// collectT lets helpers that call t.Fatal run on goroutines the test started:
// a fatal error is recorded and ends only that goroutine; report fails the
// test from its own goroutine.
type collectT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func collect(t testing.TB) *collectT { return &collectT{TB: t} }

func (e *collectT) Helper() {}

func (e *collectT) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *collectT) Error(args ...any) { e.Errorf("%s", fmt.Sprint(args...)) }
func (e *collectT) Fail()             { e.Errorf("failed") }
func (e *collectT) FailNow()          { e.Fail(); runtime.Goexit() }

func (e *collectT) Fatalf(format string, args ...any) {
	e.Errorf(format, args...)
	runtime.Goexit()
}

func (e *collectT) Fatal(args ...any) {
	e.Error(args...)
	runtime.Goexit()
}

func (e *collectT) Failed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs) > 0
}

// report fails t (from the test's goroutine) with what was collected.
func (e *collectT) report(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return
	}
	msg := strings.Join(e.errs, "\n")
	if len(msg) > 4000 {
		msg = msg[:4000] + "…"
	}
	t.Fatalf("%d error(s):\n%s", len(e.errs), msg)
}
