package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// gen is one incarnation of the server: its addresses and operator token.
// down is closed when the test kills it.
type gen struct {
	n       int
	ingress string
	owner   string
	opToken string
	pid     int
	down    chan struct{}
}

// gate tells the clients which server to talk to. While the server is down,
// and while the checks after a restart run, it holds no open generation and
// clients wait.
type gate struct {
	mu      sync.Mutex
	cur     *gen          // the generation clients may use; nil while closed
	last    *gen          // the newest generation, open or not
	changed chan struct{} // closed and replaced on every change
	stop    chan struct{} // closed when the workload must wind down
}

func newGate() *gate {
	return &gate{changed: make(chan struct{}), stop: make(chan struct{})}
}

func (g *gate) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// open lets clients use generation x.
func (g *gate) open(x *gen) {
	g.mu.Lock()
	g.cur, g.last = x, x
	g.signal()
	g.mu.Unlock()
}

// close makes clients wait (the server is being killed or checked).
func (g *gate) close() {
	g.mu.Lock()
	g.cur = nil
	g.signal()
	g.mu.Unlock()
}

// markDown closes the gate and tells the clients of x that it is gone.
func (g *gate) markDown(x *gen) {
	g.close()
	close(x.down)
}

func (g *gate) stopped() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}

var errStopped = errors.New("workload stopped")

// await returns the open generation newer than after (after = 0: any).
func (g *gate) await(ctx context.Context, after int) (*gen, error) {
	for {
		g.mu.Lock()
		cur, ch := g.cur, g.changed
		g.mu.Unlock()
		if cur != nil && cur.n > after {
			return cur, nil
		}
		select {
		case <-ch:
		case <-g.stop:
			return nil, errStopped
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pulse wakes everyone waiting for "something finished" (a task left the
// active set, so a create refused at the cap may succeed now).
type pulse struct {
	mu sync.Mutex
	ch chan struct{}
}

func newPulse() *pulse { return &pulse{ch: make(chan struct{})} }

func (p *pulse) fire() {
	p.mu.Lock()
	close(p.ch)
	p.ch = make(chan struct{})
	p.mu.Unlock()
}

func (p *pulse) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch
}

// participant is one joined session.
type participant struct {
	name  string
	id    string
	token string
	ref   string
	caps  []string
}

// apiError is a non-2xx answer: the room's error body.
type apiError struct {
	status int
	kind   string
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.status, e.kind, e.body) }

// transportError means the request's outcome is unknown: the server may or
// may not have committed it. It is never an acknowledgement.
type transportError struct{ err error }

func (e *transportError) Error() string { return "transport: " + e.err.Error() }

func kindOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.kind
	}
	return ""
}

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// client sends requests to whichever generation is current.
type client struct {
	gate *gate
	hc   *http.Client
	w    *world
	pace *pacer // nil: mutations as fast as the room answers
}

// pacer hands out one token per interval (a fixed rate of mutations, with a
// small burst), so the amount of client work — and with it the size of the
// sidecar every check reads — does not depend on how fast the machine is.
type pacer struct {
	tokens chan struct{}
	stop   chan struct{}
}

func newPacer(perSecond int, stop <-chan struct{}) *pacer {
	p := &pacer{tokens: make(chan struct{}, max(perSecond/10, 1)), stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(time.Second / time.Duration(perSecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				select {
				case p.tokens <- struct{}{}:
				default:
				}
			case <-stop:
				close(p.stop)
				return
			}
		}
	}()
	return p
}

// take waits for a token (or the end of the workload).
func (p *pacer) take(ctx context.Context) error {
	select {
	case <-p.tokens:
		return nil
	case <-p.stop:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// target says where a request goes: the ingress listener with a session
// token, or the owner listener with the operator token.
type target int

const (
	ingress target = iota
	operator
)

// call sends one request to the current generation. On a transport failure
// it waits for the generation to be declared down (a kill) and for the next
// one to open, then returns the transportError so the caller re-reads the
// authority. A transport failure without a kill is recorded as unexpected.
func (c *client) call(ctx context.Context, to target, token, method, path string, body, out any) error {
	if c.pace != nil && method != "GET" {
		if err := c.pace.take(ctx); err != nil {
			return err
		}
	}
	g, err := c.gate.await(ctx, 0)
	if err != nil {
		return err
	}
	err = c.do(ctx, g, to, token, method, path, body, out)
	var te *transportError
	if errors.As(err, &te) {
		c.afterTransportError(ctx, g, method+" "+path, te.err)
	}
	return err
}

// do sends one request to generation g, whatever the gate says (the checks
// use it while the clients are held back).
func (c *client) do(ctx context.Context, g *gen, to target, token, method, path string, body, out any) error {
	base := g.ingress
	if to == operator {
		base, token = g.owner, g.opToken
	}
	began := time.Now()
	resp, err := mcptest.Do(ctx, c.hc, method, base+path, token, body)
	b := resp.Raw
	if d := time.Since(began); d > 5*time.Second {
		c.w.slowRequest(fmt.Sprintf("%s %s on gen %d took %v (started %s, err %v)", method, path, g.n, d.Round(time.Millisecond),
			began.Format("15:04:05.000"), err))
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transportError{err}
	}
	if resp.Status/100 != 2 {
		var eb struct {
			Error string `json:"error"`
		}
		json.Unmarshal(b, &eb)
		ae := &apiError{status: resp.Status, kind: eb.Error, body: string(b)}
		if resp.Status >= 500 && eb.Error != "overloaded" && eb.Error != "unavailable" {
			c.w.unexpected("%s %s on gen %d: %v", method, path, g.n, ae)
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.w.unexpected("%s %s: a 2xx answer that is not the expected JSON: %v: %s", method, path, err, b)
			return &apiError{status: resp.Status, kind: "bad_json", body: string(b)}
		}
	}
	return nil
}

// afterTransportError waits until g is declared down and a newer generation
// is open (or the workload stops). If g is not killed within a few seconds
// the failure was not caused by a kill: that is recorded.
func (c *client) afterTransportError(ctx context.Context, g *gen, what string, err error) {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-g.down:
	case <-t.C:
		c.w.stalls.Add(1)
		c.w.unexpected("%s on gen %d failed without a kill: %v", what, g.n, err)
		return
	case <-c.gate.stop:
		return
	case <-ctx.Done():
		return
	}
	c.gate.await(ctx, g.n)
}

// retryable reports whether err says "try again": the outcome was unknown
// (the server was killed) or the writer was momentarily full.
func retryable(err error) bool {
	if isTransport(err) {
		return true
	}
	k := kindOf(err)
	return k == "overloaded" || k == "unavailable"
}
