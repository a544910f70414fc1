package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// world is the workload: the participants, the clients' shared plumbing and
// the ledger of acknowledged mutations.
type world struct {
	c     *client
	gate  *gate
	led   *ledger
	pulse *pulse

	owners, workers, approvers, editors []*participant
	readerToken                         string // any session that can read, for API checks of operator writes

	mu         sync.Mutex
	problems   []string            // unexpected answers (5xx, transport failures without a kill, double acks)
	liveTasks  map[string]liveTask // task -> its handoff, for the operator's cancels
	joinInvite string              // an unlimited invitation for late joiners
	slow       []string            // requests that took more than 5 s

	// counters for the report
	creates, capRefusals, accepts, acceptRaces, inputs, answers, completes, decisions, cancels atomic.Int64
	proposals, reviews, commits, commitRaces, staleCommits, rawCommits, joins                  atomic.Int64
	ambiguous                                                                                  atomic.Int64
	stalls                                                                                     atomic.Int64 // requests unanswered without a kill
	maxActiveSeen                                                                              atomic.Int64
	metricsPolls                                                                               atomic.Int64
}

func (w *world) slowRequest(s string) {
	w.mu.Lock()
	w.slow = append(w.slow, s)
	w.mu.Unlock()
}

func (w *world) unexpected(format string, args ...any) {
	w.mu.Lock()
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// liveTask is a task the operator may cancel: its handoff and the token of
// the handoff's owner (who can read it back for the API check).
type liveTask struct{ handoff, ownerToken string }

func (w *world) setLive(task, handoff, ownerToken string, live bool) {
	w.mu.Lock()
	if live {
		w.liveTasks[task] = liveTask{handoff, ownerToken}
	} else {
		delete(w.liveTasks, task)
	}
	w.mu.Unlock()
}

func (w *world) randomLiveTask(rng *rand.Rand) (string, liveTask, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.liveTasks) == 0 {
		return "", liveTask{}, false
	}
	i := rng.Intn(len(w.liveTasks))
	for t, lt := range w.liveTasks {
		if i == 0 {
			return t, lt, true
		}
		i--
	}
	return "", liveTask{}, false
}

// pause waits d, or less if the workload stops. It paces a client (a chosen
// interval); it never waits for a condition.
func (w *world) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.gate.stop:
	case <-ctx.Done():
	}
}

// waitForSlot waits until some task leaves the active set (or a bounded
// time passes: a slot can also be freed by a sweep or another process).
func (w *world) waitForSlot(ctx context.Context) {
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case <-w.pulse.wait():
	case <-t.C:
	case <-w.gate.stop:
	case <-ctx.Done():
	}
}

// ---- joining ----

type inviteGrant = mcptest.Invitation

type sessionGrant = mcptest.Session

// invite creates an unlimited invitation through the operator credential.
func (w *world) invite(ctx context.Context, caps []string) (inviteGrant, error) {
	var g inviteGrant
	for {
		err := w.c.call(ctx, operator, "", "POST", "/workspace/invite",
			map[string]any{"capabilities": caps, "max_uses": 0, "expires_in_minutes": 120}, &g)
		if err == nil {
			w.led.add(&ack{kind: ackInvite, gen: w.gate.genNow(), id: g.InviteID})
			return g, nil
		}
		if !retryable(err) {
			return g, err
		}
	}
}

// join redeems uri for a new participant on the ingress listener.
func (w *world) join(ctx context.Context, uri, name string) (*participant, error) {
	for {
		var g sessionGrant
		err := w.c.call(ctx, ingress, "", "POST", "/session/join", map[string]any{"invite": uri, "name": name, "kind": "agent"}, &g)
		if err == nil {
			w.joins.Add(1)
			w.led.add(&ack{kind: ackJoin, gen: w.gate.genNow(), id: g.SessionRef, who: g.ParticipantID, token: g.SessionToken})
			return &participant{name: name, id: g.ParticipantID, token: g.SessionToken, ref: g.SessionRef, caps: g.Capabilities}, nil
		}
		if !retryable(err) {
			return nil, err
		}
	}
}

// genNow is the number of the newest generation (for labelling acks).
func (g *gate) genNow() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		return 0
	}
	return g.last.n
}

// ---- handoff lifecycles ----

type createResult struct {
	Handoff  apiHandoff `json:"handoff"`
	Replayed bool       `json:"replayed"`
	Task     *struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"task"`
}

// handoffLane drives one lifecycle after another until the workload stops.
func (w *world) handoffLane(ctx context.Context, lane int, rng *rand.Rand) {
	owner := w.owners[lane%len(w.owners)]
	for n := 0; !w.gate.stopped() && ctx.Err() == nil; n++ {
		w.lifecycle(ctx, lane, n, rng, owner)
	}
}

// plan is what one lifecycle will try, chosen up front.
type plan struct {
	open        bool // an open call (no requested assignee): two workers race to accept
	cancelEarly bool // the owner cancels while a worker accepts
	askInput    int  // questions the worker asks (0 = none)
	cancelLate  bool // the owner cancels while the worker completes
	reject      bool
	adminCancel bool // the operator may cancel it (via the live-task registry)
}

func (w *world) lifecycle(ctx context.Context, lane, n int, rng *rand.Rand, owner *participant) {
	p := plan{
		open:        rng.Intn(3) == 0,
		cancelEarly: rng.Intn(12) == 0,
		cancelLate:  rng.Intn(12) == 0,
		reject:      rng.Intn(3) == 0,
		adminCancel: rng.Intn(10) == 0,
	}
	if rng.Intn(5) < 2 {
		p.askInput = 1 + rng.Intn(2)
	}
	assignee := w.workers[rng.Intn(len(w.workers))]
	key := fmt.Sprintf("lane%02d-%05d", lane, n)
	body := map[string]any{
		"summary":         fmt.Sprintf("crash test lifecycle %s", key),
		"constraints":     strings.Repeat("constraint ", rng.Intn(20)),
		"idempotency_key": key,
	}
	if !p.open {
		body["assignee"] = assignee.id
	}

	// Create. An unknown outcome is retried with the same idempotency key:
	// the room answers the original if the first attempt committed.
	var res createResult
	for {
		if w.gate.stopped() {
			return
		}
		err := w.c.call(ctx, ingress, owner.token, "POST", "/workspace/handoff", body, &res)
		if err == nil {
			break
		}
		switch {
		case kindOf(err) == "limit_exceeded":
			w.capRefusals.Add(1)
			w.waitForSlot(ctx)
		case retryable(err):
			if isTransport(err) {
				w.ambiguous.Add(1)
			} else {
				w.pause(ctx, 20*time.Millisecond)
			}
		case err == errStopped || ctx.Err() != nil:
			return
		default:
			w.unexpected("create %s: %v", key, err)
			return
		}
	}
	h := res.Handoff
	if res.Task == nil || res.Task.TaskID != h.TaskID || h.OwnerID != owner.id {
		w.unexpected("create %s answered %+v", key, res)
		return
	}
	w.creates.Add(1)
	w.led.add(&ack{kind: ackCreate, gen: w.gate.genNow(), id: h.HandoffID, task: h.TaskID, who: owner.id, token: owner.token})
	if p.adminCancel {
		w.setLive(h.TaskID, h.HandoffID, owner.token, true)
	}
	defer func() {
		w.setLive(h.TaskID, h.HandoffID, "", false)
		w.pulse.fire()
	}()

	d := &driver{w: w, ctx: ctx, rng: rng, owner: owner, h: h, plan: p, assignee: assignee}
	d.run()
}

// driver moves one handoff along its lifecycle. After any unknown outcome
// it re-reads the handoff (the authority) and continues from what it finds.
type driver struct {
	w        *world
	ctx      context.Context
	rng      *rand.Rand
	owner    *participant
	assignee *participant
	h        apiHandoff
	plan     plan
	stale    bool
	asked    bool
	early    bool // cancelEarly tried
	late     bool // cancelLate tried
	qn       int
}

func (d *driver) worker() *participant {
	id := str(d.h.AssigneeID)
	for _, p := range d.w.workers {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (d *driver) reread() bool {
	for {
		var h apiHandoff
		err := d.w.c.call(d.ctx, ingress, d.owner.token, "GET", "/workspace/handoff?handoff_id="+d.h.HandoffID, nil, &h)
		if err == nil {
			d.h, d.stale = h, false
			return true
		}
		if !retryable(err) {
			if err != errStopped && d.ctx.Err() == nil {
				d.w.unexpected("re-reading handoff %s: %v", d.h.HandoffID, err)
			}
			return false
		}
	}
}

// note classifies a failed step: unknown outcomes and conflicts make the
// driver re-read; anything else is unexpected and ends the lifecycle.
func (d *driver) note(what string, err error) bool {
	switch {
	case err == errStopped || d.ctx.Err() != nil:
		return false
	case isTransport(err):
		d.w.ambiguous.Add(1)
	case retryable(err):
		d.w.pause(d.ctx, 20*time.Millisecond)
	case statusOf(err) == 409:
	default:
		d.w.unexpected("%s on handoff %s: %v", what, d.h.HandoffID, err)
		return false
	}
	d.stale = true
	return true
}

func (d *driver) run() {
	for steps := 0; steps < 64; steps++ {
		if d.w.gate.stopped() || d.ctx.Err() != nil {
			return
		}
		if d.stale && !d.reread() {
			return
		}
		switch d.h.Status {
		case "open":
			if d.plan.cancelEarly && !d.early {
				d.early = true
				hid, tid, wk := d.h.HandoffID, d.h.TaskID, d.acceptor()
				d.race(func() { d.cancel(hid, tid) }, func() { d.accept(wk) })
			} else if d.plan.open {
				a, b := d.w.workers[d.rng.Intn(len(d.w.workers))], d.w.workers[d.rng.Intn(len(d.w.workers))]
				if a == b {
					d.accept(a)
				} else {
					d.w.acceptRaces.Add(1)
					d.raceAccepts(a, b)
				}
			} else {
				d.accept(d.assignee)
			}
		case "accepted":
			wk := d.worker()
			if wk == nil {
				d.w.unexpected("handoff %s is accepted by %q, not one of the workers", d.h.HandoffID, str(d.h.AssigneeID))
				return
			}
			switch {
			case str(d.h.TaskStatus) == "input_required":
				d.answer()
			case d.plan.askInput > 0 && !d.asked:
				d.requestInput(wk)
			case d.plan.cancelLate && !d.late:
				d.late = true
				hid, tid := d.h.HandoffID, d.h.TaskID
				d.race(func() { d.cancel(hid, tid) }, func() { d.complete(wk) })
			default:
				d.complete(wk)
			}
		case "result_ready":
			d.decide()
		case "approved", "rejected", "cancelled":
			return
		default:
			d.w.unexpected("handoff %s has status %q", d.h.HandoffID, d.h.Status)
			return
		}
	}
	d.w.unexpected("handoff %s did not finish within 64 steps (last %s/%s)", d.h.HandoffID, d.h.Status, str(d.h.TaskStatus))
}

func (d *driver) acceptor() *participant {
	if d.plan.open {
		return d.w.workers[d.rng.Intn(len(d.w.workers))]
	}
	return d.assignee
}

// race runs two steps at once; the driver re-reads afterwards.
func (d *driver) race(a, b func()) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a() }()
	go func() { defer wg.Done(); b() }()
	wg.Wait()
	d.stale = true
}

func (d *driver) accept(wk *participant) {
	var h apiHandoff
	err := d.w.c.call(d.ctx, ingress, wk.token, "POST", "/workspace/handoff/accept", map[string]any{"handoff_id": d.h.HandoffID}, &h)
	if err != nil {
		d.note("accept", err)
		return
	}
	d.w.accepts.Add(1)
	d.w.led.add(&ack{kind: ackAccept, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: wk.id, token: d.owner.token})
	d.h = h
}

// raceAccepts has two workers accept an open call at once: at most one may
// be acknowledged.
func (d *driver) raceAccepts(a, b *participant) {
	var wg sync.WaitGroup
	var oks atomic.Int64
	for _, wk := range []*participant{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h apiHandoff
			err := d.w.c.call(d.ctx, ingress, wk.token, "POST", "/workspace/handoff/accept", map[string]any{"handoff_id": d.h.HandoffID}, &h)
			if err != nil {
				if !isTransport(err) && statusOf(err) != 409 && !retryable(err) && err != errStopped && d.ctx.Err() == nil {
					d.w.unexpected("racing accept of %s: %v", d.h.HandoffID, err)
				}
				return
			}
			oks.Add(1)
			d.w.accepts.Add(1)
			d.w.led.add(&ack{kind: ackAccept, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: wk.id, token: d.owner.token})
		}()
	}
	wg.Wait()
	if oks.Load() > 1 {
		d.w.unexpected("two workers were both acknowledged accepting handoff %s", d.h.HandoffID)
	}
	d.stale = true
}

func (d *driver) requestInput(wk *participant) {
	var reqs []map[string]any
	var keys []string
	for i := 0; i < d.plan.askInput; i++ {
		d.qn++
		k := fmt.Sprintf("q%d", d.qn)
		keys = append(keys, k)
		reqs = append(reqs, map[string]any{"key": k, "message": "question " + k + " about " + d.h.HandoffID})
	}
	var h apiHandoff
	err := d.w.c.call(d.ctx, ingress, wk.token, "POST", "/workspace/handoff/request_input",
		map[string]any{"handoff_id": d.h.HandoffID, "requests": reqs}, &h)
	if err != nil {
		// A retry after an unknown outcome asks with fresh keys, which is
		// what a real client must do: keys are never reused on a task.
		if d.note("request_input", err) && !isTransport(err) {
			d.asked = true
		}
		return
	}
	d.asked = true
	d.w.inputs.Add(1)
	d.w.led.add(&ack{kind: ackRequestInput, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: wk.id, keys: keys, token: d.owner.token})
	d.h = h
}

// answer is the owner's tasks/update for every outstanding question. The
// answer to a key is always the same bytes, so a retry sends what the
// first attempt did.
func (d *driver) answer() {
	if d.stale || d.h.Inputs == nil {
		if !d.reread() {
			return
		}
	}
	responses := map[string]json.RawMessage{}
	answers := map[string]string{}
	var keys []string
	for _, in := range d.h.Inputs {
		if in.Status != "open" {
			continue
		}
		b, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"answer": "answer to " + in.Key + " of " + d.h.HandoffID}})
		responses[in.Key] = b
		answers[in.Key] = string(b)
		keys = append(keys, in.Key)
	}
	if len(keys) == 0 {
		d.stale = true
		return
	}
	err := d.w.c.call(d.ctx, ingress, d.owner.token, "POST", "/workspace/task/update",
		map[string]any{"task_id": d.h.TaskID, "input_responses": responses}, nil)
	d.stale = true
	if err != nil {
		d.note("task update", err)
		return
	}
	d.w.answers.Add(1)
	d.w.led.add(&ack{kind: ackAnswer, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: d.owner.id, keys: keys, answers: answers, token: d.owner.token})
}

func (d *driver) complete(wk *participant) {
	text := fmt.Sprintf("result of %s by %s", d.h.HandoffID, wk.name)
	var h apiHandoff
	err := d.w.c.call(d.ctx, ingress, wk.token, "POST", "/workspace/handoff/complete", map[string]any{
		"handoff_id": d.h.HandoffID, "result": map[string]any{"text": text}, "status_message": "done",
	}, &h)
	if err != nil {
		d.note("complete", err)
		return
	}
	d.w.completes.Add(1)
	a := &ack{kind: ackComplete, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: wk.id, token: d.owner.token}
	if !h.AlreadyCompleted {
		a.text = &text
	}
	d.w.led.add(a)
	d.w.pulse.fire()
	d.h = h
}

func (d *driver) decide() {
	ap := d.w.approvers[d.rng.Intn(len(d.w.approvers))]
	path, kind := "/workspace/handoff/approve", ackApprove
	if d.plan.reject {
		path, kind = "/workspace/handoff/reject", ackReject
	}
	var h apiHandoff
	err := d.w.c.call(d.ctx, ingress, ap.token, "POST", path, map[string]any{"handoff_id": d.h.HandoffID, "note": "crash test"}, &h)
	if err != nil {
		d.note("decide", err)
		return
	}
	d.w.decisions.Add(1)
	d.w.led.add(&ack{kind: kind, gen: d.w.gate.genNow(), id: d.h.HandoffID, task: d.h.TaskID, who: ap.id, token: d.owner.token})
	d.h = h
}

// cancel is the owner's tasks/cancel. It runs beside another step of the
// same handoff, so it touches only the ids it is given.
func (d *driver) cancel(hid, tid string) {
	err := d.w.c.call(d.ctx, ingress, d.owner.token, "POST", "/workspace/task/cancel", map[string]any{"task_id": tid}, nil)
	if err != nil {
		if !isTransport(err) && !retryable(err) && err != errStopped && d.ctx.Err() == nil {
			d.w.unexpected("cancel of %s: %v", tid, err)
		}
		return
	}
	d.w.cancels.Add(1)
	d.w.led.add(&ack{kind: ackCancel, gen: d.w.gate.genNow(), id: hid, task: tid, who: d.owner.id, token: d.owner.token})
	d.w.pulse.fire()
}

// ---- proposals ----

type proposalOut struct {
	ProposalID string `json:"proposal_id"`
	Status     string `json:"status"`
}

type commitOut struct {
	Version       int64  `json:"version"`
	ParticipantID string `json:"participant_id"`
}

// document renders a whole-document proposal: a few headings and a body of
// random size, so file writes differ in length.
func document(tag string, rng *rand.Rand) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Crash test\n\n## Log\n\nlast edit: %s\n\n## Notes\n\n", tag)
	for i, n := 0, rng.Intn(60); i < n; i++ {
		fmt.Fprintf(&b, "- line %d of %s: %x\n", i, tag, rng.Uint64())
	}
	return b.String()
}

// proposalLane proposes whole-document changes against the current version,
// has them reviewed, and commits them, sometimes from two editors at once.
func (w *world) proposalLane(ctx context.Context, lane int, rng *rand.Rand) {
	for n := 0; !w.gate.stopped() && ctx.Err() == nil; n++ {
		w.proposal(ctx, lane, n, rng)
	}
}

func (w *world) pick(rng *rand.Rand, ps []*participant, not ...*participant) *participant {
	for {
		p := ps[rng.Intn(len(ps))]
		ok := true
		for _, q := range not {
			ok = ok && p != q
		}
		if ok || len(ps) <= len(not) {
			return p
		}
	}
}

// tryOnce runs one request; ok=false means give up on this proposal (an
// unknown outcome, a refusal, or the end of the workload).
func (w *world) tryOnce(ctx context.Context, what string, expected func(error) bool, f func() error) bool {
	for {
		err := f()
		switch {
		case err == nil:
			return true
		case err == errStopped || ctx.Err() != nil:
			return false
		case isTransport(err):
			w.ambiguous.Add(1)
			return false
		case retryable(err):
			w.pause(ctx, 20*time.Millisecond)
		case expected != nil && expected(err):
			return false
		default:
			w.unexpected("%s: %v", what, err)
			return false
		}
	}
}

func (w *world) proposal(ctx context.Context, lane, n int, rng *rand.Rand) {
	author := w.pick(rng, w.editors)
	var st struct {
		Version int64 `json:"version"`
	}
	if !w.tryOnce(ctx, "status", nil, func() error {
		return w.c.call(ctx, ingress, author.token, "GET", "/workspace/status", nil, &st)
	}) {
		return
	}
	content := document(fmt.Sprintf("lane %d proposal %d", lane, n), rng)
	var pr proposalOut
	if !w.tryOnce(ctx, "propose", nil, func() error {
		return w.c.call(ctx, ingress, author.token, "POST", "/workspace/propose", map[string]any{
			"target": "workspace", "base_version": st.Version, "summary": fmt.Sprintf("lane %d #%d", lane, n),
			"change": map[string]any{"content": content},
		}, &pr)
	}) {
		return
	}
	w.proposals.Add(1)
	w.led.add(&ack{kind: ackPropose, gen: w.gate.genNow(), id: pr.ProposalID, who: author.id, token: author.token})
	if rng.Intn(10) == 0 {
		return // left pending: the next commit supersedes it
	}
	reviewer := w.pick(rng, w.editors, author)
	approve := rng.Intn(8) != 0
	if !w.tryOnce(ctx, "review", func(err error) bool { return statusOf(err) == 409 }, func() error {
		return w.c.call(ctx, ingress, reviewer.token, "POST", "/workspace/proposal/review",
			map[string]any{"proposal_id": pr.ProposalID, "approve": approve}, nil)
	}) {
		return // 409: superseded by a commit in the meantime
	}
	w.reviews.Add(1)
	kind := ackReviewReject
	if approve {
		kind = ackReviewApprove
	}
	w.led.add(&ack{kind: kind, gen: w.gate.genNow(), id: pr.ProposalID, who: reviewer.id, token: reviewer.token})
	if !approve {
		return
	}
	committers := []*participant{w.pick(rng, w.editors)}
	if rng.Intn(4) == 0 {
		committers = append(committers, w.pick(rng, w.editors, committers[0]))
		w.commitRaces.Add(1)
	}
	var wg sync.WaitGroup
	var oks atomic.Int64
	for _, cm := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out commitOut
			err := w.c.call(ctx, ingress, cm.token, "POST", "/workspace/commit", map[string]any{"proposal_id": pr.ProposalID}, &out)
			switch {
			case err == nil:
				oks.Add(1)
				w.commits.Add(1)
				w.led.add(&ack{kind: ackCommit, gen: w.gate.genNow(), id: pr.ProposalID, who: cm.id, token: cm.token,
					version: out.Version, sha: sha(content)})
				if out.ParticipantID != cm.id {
					w.unexpected("commit of %s answered participant %s, committer %s", pr.ProposalID, out.ParticipantID, cm.id)
				}
			case kindOf(err) == "stale_version":
				w.staleCommits.Add(1)
			case statusOf(err) == 409, isTransport(err), retryable(err), err == errStopped, ctx.Err() != nil:
			default:
				w.unexpected("commit of %s: %v", pr.ProposalID, err)
			}
		}()
	}
	wg.Wait()
	if oks.Load() > 1 {
		w.unexpected("proposal %s was acknowledged committed twice", pr.ProposalID)
	}
}

// ---- the operator ----

// operatorLane is the local operator (the .commonroom.owner credential on
// the owner listener): raw commits, admin cancels of live tasks, invitations.
func (w *world) operatorLane(ctx context.Context, rng *rand.Rand) {
	for n := 0; !w.gate.stopped() && ctx.Err() == nil; n++ {
		w.pause(ctx, time.Duration(50+rng.Intn(250))*time.Millisecond)
		switch r := rng.Intn(10); {
		case r < 4:
			var st struct {
				Version int64 `json:"version"`
			}
			if !w.tryOnce(ctx, "operator status", nil, func() error {
				return w.c.call(ctx, operator, "", "GET", "/workspace/status", nil, &st)
			}) {
				continue
			}
			content := document(fmt.Sprintf("operator raw commit %d", n), rng)
			var out commitOut
			if !w.tryOnce(ctx, "raw commit", func(err error) bool { return kindOf(err) == "stale_version" }, func() error {
				return w.c.call(ctx, operator, "", "POST", "/workspace/commit", map[string]any{
					"base_version": st.Version, "summary": fmt.Sprintf("operator %d", n), "content": content,
				}, &out)
			}) {
				continue
			}
			w.rawCommits.Add(1)
			w.led.add(&ack{kind: ackRawCommit, gen: w.gate.genNow(), id: fmt.Sprintf("v%d", out.Version), who: out.ParticipantID,
				token: w.readerToken, version: out.Version, sha: sha(content)})
		case r < 8:
			task, lt, ok := w.randomLiveTask(rng)
			if !ok {
				continue
			}
			if !w.tryOnce(ctx, "operator cancel", nil, func() error {
				return w.c.call(ctx, operator, "", "POST", "/workspace/task/cancel", map[string]any{"task_id": task}, nil)
			}) {
				continue
			}
			w.cancels.Add(1)
			w.led.add(&ack{kind: ackCancel, gen: w.gate.genNow(), id: lt.handoff, task: task, who: "operator", token: lt.ownerToken})
			w.pulse.fire()
		default:
			if _, err := w.invite(ctx, []string{"read"}); err != nil && !isTransport(err) && err != errStopped && ctx.Err() == nil {
				w.unexpected("operator invite: %v", err)
			}
		}
	}
}

// joinerLane keeps admitting new participants while the room crashes and
// restarts: joins are mutations too.
func (w *world) joinerLane(ctx context.Context, rng *rand.Rand) {
	for n := 0; !w.gate.stopped() && ctx.Err() == nil; n++ {
		w.pause(ctx, time.Duration(200+rng.Intn(800))*time.Millisecond)
		if _, err := w.join(ctx, w.joinInvite, fmt.Sprintf("late-%d", n)); err != nil && !isTransport(err) && err != errStopped && ctx.Err() == nil {
			w.unexpected("late join: %v", err)
		}
	}
}

// metricsLane samples GET /debug/metrics on the owner listener: the room's
// active_tasks must never exceed the cap, even between kills.
func (w *world) metricsLane(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !w.gate.stopped() && ctx.Err() == nil {
		var m struct {
			Room struct {
				ActiveTasks *int64 `json:"active_tasks"`
			} `json:"room"`
		}
		err := w.c.call(ctx, operator, "", "GET", "/debug/metrics", nil, &m)
		if err == nil {
			if m.Room.ActiveTasks == nil {
				w.unexpected("/debug/metrics has no room.active_tasks")
				return
			}
			w.metricsPolls.Add(1)
			for {
				old := w.maxActiveSeen.Load()
				if *m.Room.ActiveTasks <= old || w.maxActiveSeen.CompareAndSwap(old, *m.Room.ActiveTasks) {
					break
				}
			}
		}
		select {
		case <-tick.C:
		case <-w.gate.stop:
		case <-ctx.Done():
		}
	}
}
