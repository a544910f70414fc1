package cli

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/transport"
)

// How the bridge keeps an old-era host's resource subscriptions alive. The
// room's own resources/subscribe answers whether the host may follow a
// resource (the room's refusal is passed on as it is); what the host then
// hears comes from one subscriptions/listen stream the bridge holds for the
// whole set. A change of the set opens a stream for the new set before the
// old one is ended, so a resource followed all along misses nothing. A
// stream the room ends (it restarted, dropped the bridge for lagging, or the
// network went) is opened again after a pause that grows while it keeps
// failing. Nothing from the gap is replayed (the brief): once following
// again, the bridge tells the host each followed resource may have changed,
// so it reads them again instead of trusting what it had.
const (
	listenRetryMin = 250 * time.Millisecond
	listenRetryMax = 10 * time.Second
	// listenStable is how long a stream must have lived for the next
	// failure to start again from the shortest pause.
	listenStable = 10 * time.Second
	// listenMaxFrame bounds one frame of the bridge's own listen stream
	// (resource notifications are a few hundred bytes).
	listenMaxFrame = 1 << 20
)

const (
	methodListenAck       = "notifications/subscriptions/acknowledged"
	methodResourceUpdated = "notifications/resources/updated"
)

// resourceWatch is the bridge's listen stream for an old-era host's
// resources/subscribe set. Its loop is the only goroutine that opens or
// ends streams; subscribe and unsubscribe change the set and wait until
// the room carries it.
type resourceWatch struct {
	b     *bridge
	h     *legacyHost
	nonce string
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	wake  chan struct{} // capacity 1: the set changed

	mu   sync.Mutex
	uris []string // sorted, unique
	gen  uint64   // bumped on every change of uris
	// settled is the newest generation the loop has acted on; err is why
	// it could not be followed (nil: the room acknowledged it).
	settled uint64
	err     error
	changed chan struct{} // closed and replaced whenever settled moves

	closers sync.WaitGroup // streams being ended
}

// watch returns the host's resource watch, starting it on first use.
// Only the bridge's reading loop calls it, as it calls close.
func (b *bridge) watch(h *legacyHost) *resourceWatch {
	if b.resources == nil {
		var n [6]byte
		crand.Read(n[:])
		ctx, stop := context.WithCancel(context.Background())
		b.resources = &resourceWatch{b: b, h: h, nonce: hex.EncodeToString(n[:]), ctx: ctx, stop: stop,
			done: make(chan struct{}), wake: make(chan struct{}, 1), changed: make(chan struct{})}
		go b.resources.loop()
	}
	return b.resources
}

// close ends the stream and waits for the loop.
func (w *resourceWatch) close() {
	w.stop()
	<-w.done
}

// after is what resources/subscribe (on=true) or resources/unsubscribe does
// once the room has answered it: on success the set changes, and the answer
// waits until the room follows the new set. A subscribe the bridge then
// cannot follow is answered with the reason, and the URI is dropped again.
func (w *resourceWatch) after(on bool, params json.RawMessage) afterFunc {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(orEmpty(params), &p)
	return func(ctx context.Context, body []byte) []byte {
		var msg struct {
			ID    json.RawMessage `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Error != nil || p.URI == "" {
			return body
		}
		gen := w.update(p.URI, on)
		err := w.wait(ctx, gen)
		if !on || err == nil {
			return body
		}
		w.update(p.URI, false)
		var re *roomError
		if errors.As(err, &re) {
			out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": idOrNull(msg.ID), "error": re.obj})
			return out
		}
		w.b.log.Warn("the room's listen stream for resources/subscribe", "err", transport.Redact(err.Error()))
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": idOrNull(msg.ID), "error": map[string]any{
			"code": rpcInternalError, "message": "the room is unreachable: " + transport.Redact(err.Error()),
			"data": map[string]any{"error": "unavailable", "retryable": true}}})
		return out
	}
}

// update adds or removes uri and returns the new generation.
func (w *resourceWatch) update(uri string, add bool) uint64 {
	w.mu.Lock()
	i, held := slices.BinarySearch(w.uris, uri)
	switch {
	case add && !held:
		w.uris = append(w.uris[:i], append([]string{uri}, w.uris[i:]...)...)
	case !add && held:
		w.uris = append(w.uris[:i], w.uris[i+1:]...)
	default:
		gen := w.gen
		w.mu.Unlock()
		return gen
	}
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return gen
}

// wait returns once the loop has acted on generation gen or a later one:
// nil when the room follows the set, else why not.
func (w *resourceWatch) wait(ctx context.Context, gen uint64) error {
	for {
		w.mu.Lock()
		if w.settled >= gen {
			err := w.err
			w.mu.Unlock()
			return err
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-w.done:
			return errors.New("the bridge is stopping")
		}
	}
}

func (w *resourceWatch) snapshot() ([]string, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.uris...), w.gen
}

func (w *resourceWatch) settle(gen uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen < w.settled {
		return
	}
	w.settled, w.err = gen, err
	close(w.changed)
	w.changed = make(chan struct{})
}

// loop keeps one stream carrying the current set, until stopped.
func (w *resourceWatch) loop() {
	defer close(w.done)
	var cur *roomListen
	defer func() {
		if cur != nil {
			w.end(cur)
		}
		w.closers.Wait()
	}()
	pause := listenRetryMin
	gap := false
	for {
		uris, gen := w.snapshot()
		if cur == nil || cur.gen != gen {
			if len(uris) == 0 {
				if cur != nil {
					w.end(cur)
					cur = nil
				}
				w.settle(gen, nil)
			} else {
				next, err := w.open(uris, gen)
				if err != nil && cur != nil && isLimitExceeded(err) {
					// No slot for a second stream (the room's
					// --streams-per-session): end the old one first.
					w.end(cur)
					cur = nil
					next, err = w.open(uris, gen)
				}
				if err != nil {
					w.settle(gen, err)
					if !w.pauseFor(&pause) {
						return
					}
					continue
				}
				if cur != nil {
					w.end(cur)
				}
				cur = next
				w.settle(gen, nil)
				if gap {
					for _, u := range uris {
						w.emitUpdated(u, nil)
					}
					gap = false
				}
			}
		}
		var ended <-chan struct{}
		if cur != nil {
			ended = cur.done
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		case <-ended:
			w.b.log.Info("the room ended the resource stream; following again", "err", cur.why())
			if time.Since(cur.opened) >= listenStable {
				pause = listenRetryMin
			}
			w.end(cur)
			cur = nil
			gap = true
			if !w.pauseFor(&pause) {
				return
			}
		}
	}
}

// pauseFor waits *d (with jitter) before the next attempt, and doubles it;
// a change of the set cuts the wait short. It reports false once stopped.
func (w *resourceWatch) pauseFor(d *time.Duration) bool {
	t := time.NewTimer(*d/2 + rand.N(*d/2+1))
	defer t.Stop()
	*d = min(*d*2, listenRetryMax)
	select {
	case <-w.ctx.Done():
		return false
	case <-w.wake:
		select { // the loop must still see the change
		case w.wake <- struct{}{}:
		default:
		}
	case <-t.C:
	}
	return true
}

// roomListen is one subscriptions/listen stream of the bridge's own.
type roomListen struct {
	id     string
	gen    uint64
	opened time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when its reader returns
	// retired is set once another stream (or none) replaced it: its frames
	// are no longer passed on.
	retired atomic.Bool
	err     atomic.Value // error: why the stream ended
}

func (l *roomListen) why() string {
	if e, ok := l.err.Load().(error); ok {
		return transport.Redact(e.Error())
	}
	return "the stream ended"
}

// roomError is a JSON-RPC error the room answered the listen with.
type roomError struct{ obj json.RawMessage }

func (e *roomError) Error() string { return "the room refused: " + string(e.obj) }

func isLimitExceeded(err error) bool {
	var re *roomError
	if !errors.As(err, &re) {
		return false
	}
	var o struct {
		Data struct {
			Error string `json:"error"`
		} `json:"data"`
	}
	json.Unmarshal(re.obj, &o)
	return o.Data.Error == "limit_exceeded"
}

// open starts a listen for uris and returns once the room acknowledged it
// naming every one of them, or with why it did not.
func (w *resourceWatch) open(uris []string, gen uint64) (*roomListen, error) {
	id := fmt.Sprintf("ce-mcp/%s/%d", w.nonce, gen)
	idJSON, _ := json.Marshal(id)
	params, _ := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}})
	line, newParams, err := w.h.rewrite(idJSON, "subscriptions/listen", params)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(w.ctx)
	untilAck := time.AfterFunc(w.b.reqTimeout, cancel)
	resp, err := w.b.post(ctx, line, "subscriptions/listen", newParams)
	if err != nil {
		untilAck.Stop()
		cancel()
		if errors.Is(err, context.Canceled) && w.ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s", w.b.reqTimeout)
		}
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		defer resp.Body.Close()
		defer cancel()
		untilAck.Stop()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, listenMaxFrame))
		var m struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &m) == nil && m.Error != nil {
			return nil, &roomError{obj: m.Error}
		}
		return nil, fmt.Errorf("the room answered the listen with HTTP %d", resp.StatusCode)
	}
	l := &roomListen{id: id, gen: gen, opened: time.Now(), cancel: cancel, done: make(chan struct{})}
	acked := make(chan json.RawMessage, 1)
	go w.read(l, resp.Body, acked)
	var ack json.RawMessage
	select {
	case ack = <-acked:
	case <-l.done:
	}
	untilAck.Stop()
	if ack == nil {
		cancel()
		<-l.done
		return nil, fmt.Errorf("the listen stream ended before it was acknowledged: %s", l.why())
	}
	var a struct {
		Notifications struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	json.Unmarshal(ack, &a)
	for _, u := range uris {
		if !slices.Contains(a.Notifications.ResourceSubscriptions, u) {
			w.end(l)
			return nil, &roomError{obj: mustJSON(map[string]any{"code": rpcInvalidParams,
				"message": "the room will not send updates of this resource to this session", "data": map[string]any{"uri": u}})}
		}
	}
	return l, nil
}

// read passes the stream's resource notifications to the host until it
// ends; the first frame, the acknowledgement, goes to acked.
func (w *resourceWatch) read(l *roomListen, body io.ReadCloser, acked chan<- json.RawMessage) {
	defer close(l.done)
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 4<<10), listenMaxFrame)
	var data []byte
	first := true
	frame := func() bool {
		d := data
		data = nil
		if len(d) == 0 {
			return true
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(d, &m) != nil {
			l.err.Store(errors.New("the room sent a frame that is not JSON"))
			return false
		}
		switch {
		case m.Method == methodListenAck && first:
			first = false
			var p struct {
				Notifications json.RawMessage `json:"notifications"`
			}
			json.Unmarshal(m.Params, &p)
			acked <- append(json.RawMessage(`{"notifications":`), append(orEmpty(p.Notifications), '}')...)
		case m.Method == methodResourceUpdated:
			if !l.retired.Load() {
				w.emitUpdated("", m.Params)
			}
		case m.Method == "":
			l.err.Store(errors.New("the room ended the stream")) // the final result: it is stopping, or the session ended
			return false
		}
		return true
	}
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if !frame() {
				return
			}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		l.err.Store(err)
	}
}

// emitUpdated tells the host a resource changed: the room's params without
// the listen's _meta (the host opened no listen), or just uri.
func (w *resourceWatch) emitUpdated(uri string, params json.RawMessage) {
	p := map[string]json.RawMessage{}
	if params != nil {
		if json.Unmarshal(params, &p) != nil {
			return
		}
		delete(p, "_meta")
	} else {
		p["uri"], _ = json.Marshal(uri)
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": methodResourceUpdated, "params": p})
	w.b.writeLine(out)
}

// end retires l and closes it: the room is told first (notifications/
// cancelled, so it frees the stream's slot at once), then the connection.
// The closing runs beside the loop; the loop's exit waits for it.
func (w *resourceWatch) end(l *roomListen) {
	if l.retired.Swap(true) {
		return
	}
	w.closers.Add(1)
	go func() {
		defer w.closers.Done()
		defer func() { l.cancel(); <-l.done }()
		select {
		case <-l.done:
			return // already over
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(w.b.reqTimeout, bridgeNotifyTimeout))
		defer cancel()
		idJSON, _ := json.Marshal(l.id)
		params, _ := json.Marshal(map[string]any{"requestId": json.RawMessage(idJSON)})
		line, newParams, err := w.h.rewrite(nil, "notifications/cancelled", params)
		if err != nil {
			return
		}
		if resp, err := w.b.post(ctx, line, "notifications/cancelled", newParams); err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		}
	}()
}
