package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashKill9 is issue #8 item 1. It serves a file, drives well over 32
// concurrent clients through handoff lifecycles (create, accept, request
// input, answer, complete, approve or reject, cancels racing the workers)
// and proposals (propose, review, racing commits), records every mutation
// the room acknowledged (2xx), and SIGKILLs the server at random moments.
// After every kill it inspects the sidecar as the crash left it, restarts
// `ce serve` on the same file, and checks — with a read-only SQLite
// connection and through the API — that every acknowledged mutation is
// there and at least as far along as acknowledged, that events and state
// changes agree, that at most 32 tasks are active, that the database is
// intact, and that the Markdown file's text was never lost.
//
// CE_CRASH_KILLS (default 10) sets the number of kills, CE_CRASH_SECONDS
// (default 30) the time the workload runs in total, CE_CRASH_SEED the seed
// of the random kill moments and client choices (printed on every run), and
// CE_CRASH_RATE a cap on mutations per second (default: none, or 400 under
// -race, where every client request and every check costs several times more).
func TestCrashKill9(t *testing.T) {
	kills := envInt(t, "CE_CRASH_KILLS", 10)
	total := envSeconds(t, "CE_CRASH_SECONDS", 30*time.Second)
	// Under -race every client and every check costs several times more:
	// the kills stay, the mutation rate is capped.
	defaultRate := 0
	if raceEnabled {
		defaultRate = 400
	}
	rate := envInt(t, "CE_CRASH_RATE", defaultRate)
	seed := time.Now().UnixNano()
	if v := os.Getenv("CE_CRASH_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CE_CRASH_SEED=%q: %v", v, err)
		}
		seed = n
	}
	report := func(format string, args ...any) {
		t.Logf(format, args...)
		if testing.Verbose() {
			fmt.Printf("crashtest: "+format+"\n", args...)
		}
	}
	paced := "as fast as the room answers"
	if rate > 0 {
		paced = fmt.Sprintf("at most %d mutations/s", rate)
	}
	report("seed %d (CE_CRASH_SEED=%d repeats the kill delays and every client's choices; the interleaving stays the scheduler's), %d kills over %v, clients %s", seed, seed, kills, total, paced)
	rng := rand.New(rand.NewSource(seed))
	began := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), total+3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	file := filepath.Join(dir, "room.md")
	if err := os.WriteFile(file, []byte("# Crash test\n\n## Log\n\nnothing yet\n\n## Notes\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbPath := file + ".commonroom.db"

	g := newGate()
	w := &world{gate: g, led: &ledger{}, pulse: newPulse(), liveTasks: map[string]liveTask{}}
	hc := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
	}}
	t.Cleanup(hc.CloseIdleConnections)
	w.c = &client{gate: g, hc: hc, w: w}
	if rate > 0 {
		w.c.pace = newPacer(rate, g.stop)
	}
	ck := &checker{t: t, w: w, file: file, db: dbPath, report: report, tempFiles: map[string]bool{}}

	srv := startServer(t, dir, file)
	cur := newGen(1, srv)
	g.open(cur)

	// The cast. Invitations come from the operator credential (the owner
	// listener); everyone joins on the ingress listener.
	roles := []struct {
		n    int
		caps []string
		into *[]*participant
		name string
	}{
		{10, []string{"read", "propose"}, &w.owners, "owner"},
		{12, []string{"read", "checkout"}, &w.workers, "worker"},
		{6, []string{"read", "approve"}, &w.approvers, "approver"},
		{4, []string{"read", "propose", "approve", "commit"}, &w.editors, "editor"},
	}
	for _, r := range roles {
		inv, err := w.invite(ctx, r.caps)
		if err != nil {
			t.Fatalf("inviting %ss: %v", r.name, err)
		}
		for i := 0; i < r.n; i++ {
			p, err := w.join(ctx, inv.URI, fmt.Sprintf("%s-%d", r.name, i))
			if err != nil {
				t.Fatalf("joining %s-%d: %v", r.name, i, err)
			}
			*r.into = append(*r.into, p)
		}
	}
	w.readerToken = w.approvers[0].token
	inv, err := w.invite(ctx, []string{"read"})
	if err != nil {
		t.Fatalf("inviting late joiners: %v", err)
	}
	w.joinInvite = inv.URI

	const handoffLanes, proposalLanes = 40, 8
	var wg sync.WaitGroup
	laneRNG := func(i int) *rand.Rand { return rand.New(rand.NewSource(seed + int64(i+1)*7919)) }
	for i := 0; i < handoffLanes; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); w.handoffLane(ctx, i, laneRNG(i)) }()
	}
	for i := 0; i < proposalLanes; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); w.proposalLane(ctx, i, laneRNG(100+i)) }()
	}
	wg.Add(3)
	go func() { defer wg.Done(); w.operatorLane(ctx, laneRNG(200)) }()
	go func() { defer wg.Done(); w.joinerLane(ctx, laneRNG(201)) }()
	go func() { defer wg.Done(); w.metricsLane(ctx) }()
	clients := handoffLanes + proposalLanes + 3
	stopWorkload := sync.OnceFunc(func() { close(g.stop) })
	t.Cleanup(func() {
		stopWorkload()
		cancel()
		wg.Wait()
	})
	summary := func() {
		w.mu.Lock()
		problems := append([]string(nil), w.problems...)
		slow := append([]string(nil), w.slow...)
		w.mu.Unlock()
		report("kills %d, restarts %d, clients %d (%d handoff lanes, %d proposal lanes, operator, joiner, metrics poller)",
			ck.kills, ck.restarts, clients, handoffLanes, proposalLanes)
		report("acknowledged mutations %d, all checked at the last inspection; %d acknowledgement checks in total over %d inspections; %d requests with an unknown outcome",
			w.led.len(), ck.ackChecks, ck.inspections, w.ambiguous.Load())
		report("by kind: %s", ck.kinds())
		report("handoffs created %d (refused at the cap %d), accepts %d (%d races of two workers), input requests %d, answers %d, completions %d, decisions %d, cancels %d",
			w.creates.Load(), w.capRefusals.Load(), w.accepts.Load(), w.acceptRaces.Load(), w.inputs.Load(), w.answers.Load(),
			w.completes.Load(), w.decisions.Load(), w.cancels.Load())
		report("proposals %d, reviews %d, commits %d (%d stale, %d races of two committers), operator raw commits %d, joins %d",
			w.proposals.Load(), w.reviews.Load(), w.commits.Load(), w.staleCommits.Load(), w.commitRaces.Load(), w.rawCommits.Load(), w.joins.Load())
		report("max active tasks: %d in /debug/metrics (%d samples), %d in the sidecar at an inspection; the cap is %d",
			w.maxActiveSeen.Load(), w.metricsPolls.Load(), ck.maxActive, maxActiveTasks)
		report("kills between a file write and its COMMIT (file ahead of the sidecar): %d; external edits made while down: %d; temporary files left beside the document: %d",
			ck.torn, ck.externalEdits, len(ck.tempFiles))
		for i, s := range slow {
			if i == 20 {
				report("… %d more slow requests", len(slow)-20)
				break
			}
			report("slow: %s", s)
		}
		if w.maxActiveSeen.Load() > maxActiveTasks {
			ck.violate("/debug/metrics showed %d active tasks; the cap is %d", w.maxActiveSeen.Load(), maxActiveTasks)
		}
		for _, p := range problems {
			t.Errorf("unexpected answer: %s", p)
		}
		report("violations %d, unexpected answers %d, wall time %v", len(ck.violations), len(problems), time.Since(began).Round(time.Millisecond))
		if len(ck.violations) > 0 {
			shown := ck.violations
			if len(shown) > 50 {
				shown = shown[:50]
			}
			t.Errorf("%d violations (first %d):\n%s", len(ck.violations), len(shown), strings.Join(shown, "\n"))
		}
	}
	// A room that stops answering is not worth crashing further: report
	// what is known and stop.
	abortIfStalled := func(when string) {
		if !ck.stalled && w.stalls.Load() == 0 {
			return
		}
		stopWorkload()
		g.close()
		summary()
		t.Fatalf("%s: the room stopped answering (%d client requests and %d check reads got no answer within %v); see the violations and unexpected answers above",
			when, w.stalls.Load(), ck.stalledReads, requestTimeout)
	}

	// The kills: each after a random delay around total/(kills+1).
	avg := total / time.Duration(kills+1)
	for k := 0; k < kills; k++ {
		delay := avg/10 + time.Duration(rng.Int63n(int64(avg*18/10)+1))
		w.pause(ctx, delay)
		abortIfStalled(fmt.Sprintf("before kill %d", k+1))
		if ctx.Err() != nil {
			summary()
			t.Fatalf("the test ran out of time after %d kills", k)
		}
		srv.kill9()
		g.markDown(cur)
		ck.kills++
		phase := time.Now()

		// The sidecar and the file exactly as the crash left them.
		pre := ck.afterCrash(ctx, fmt.Sprintf("after kill %d (gen %d, %v into it)", k+1, cur.n, delay.Round(time.Millisecond)))
		if rng.Intn(4) == 0 && pre.newest != nil && pre.file == pre.newest.content {
			// Someone edits the file while the room is down: the next start
			// must record it as an external edit.
			pre.file = document(fmt.Sprintf("external edit while down %d", k+1), rng)
			if err := os.WriteFile(file, []byte(pre.file), 0o644); err != nil {
				t.Fatal(err)
			}
			ck.externalEdits++
		}
		inspected := time.Since(phase)

		phase = time.Now()
		srv = startServer(t, dir, file)
		ck.restarts++
		cur = newGen(k+2, srv)
		started := time.Since(phase)

		phase = time.Now()
		ck.afterRestart(ctx, fmt.Sprintf("restart %d (gen %d)", k+1, cur.n), cur, pre)
		t.Logf("kill %d after %v: crash state inspected in %v, restarted in %v, checked in %v (%d acknowledgements so far)",
			k+1, delay.Round(time.Millisecond), inspected.Round(time.Millisecond), started.Round(time.Millisecond),
			time.Since(phase).Round(time.Millisecond), w.led.len())
		abortIfStalled(fmt.Sprintf("after restart %d", k+1))
		g.open(cur)
	}

	// A last stretch of work, then wind down: lanes finish what they are
	// doing (so every answer they got is recorded) and stop.
	w.pause(ctx, avg)
	stopWorkload()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		summary()
		t.Fatalf("the clients did not stop")
	}
	g.close()
	ck.final(ctx, cur)
	abortIfStalled("at the end")
	if code := srv.terminate(); code != 0 {
		ck.violate("graceful stop after the run: exit code %d", code)
	}
	ck.afterStop(ctx)
	summary()
}

// requestTimeout bounds every request. Answers take milliseconds; a request
// still unanswered after this long means the room stopped answering.
const requestTimeout = 20 * time.Second

func newGen(n int, s *server) *gen {
	return &gen{n: n, ingress: s.Owner.IngressURL, owner: s.Owner.OwnerURL, opToken: s.Owner.OperatorToken,
		pid: s.cmd.Process.Pid, down: make(chan struct{})}
}

// checker runs the checks and keeps the tallies.
type checker struct {
	t      *testing.T
	w      *world
	file   string
	db     string
	report func(string, ...any)

	kills, restarts, inspections, ackChecks int
	torn, externalEdits                     int
	tempFiles                               map[string]bool
	maxActive                               int
	maxVersion                              int64
	apiFrom                                 int // ledger index the API has checked up to
	stalled                                 bool
	stalledReads                            int
	violations                              []string
}

func (ck *checker) violate(format string, args ...any) {
	ck.violations = append(ck.violations, fmt.Sprintf(format, args...))
}

// crashState is what a kill left behind.
type crashState struct {
	file   string
	newest *versionRow // newest version in the sidecar, nil if it could not be read
}

// inspect loads a snapshot after taking the ledger, so every acknowledgement
// it checks was given before the snapshot began, and checks the invariants
// and every acknowledgement. full asks for PRAGMA integrity_check rather than
// quick_check (the crash state gets the quick one: the restart that follows
// is checked in full, and integrity_check is slow under -race).
func (ck *checker) inspect(ctx context.Context, label string, full bool) (*snapshot, []*ack) {
	acks := ck.w.led.since(0)
	began := time.Now()
	s, err := loadSnapshot(ctx, ck.db, full)
	if err != nil {
		ck.violate("%s: reading the sidecar read-only: %v", label, err)
		return nil, acks
	}
	loaded := time.Since(began)
	defer func() {
		ck.t.Logf("%s: sidecar read in %v, checked in %v", label, loaded.Round(time.Millisecond), (time.Since(began) - loaded).Round(time.Millisecond))
	}()
	ck.inspections++
	for _, v := range s.invariants() {
		ck.violate("%s: %s", label, v)
	}
	for _, a := range acks {
		for _, v := range a.verifyDB(s) {
			ck.violate("%s: %s", label, v)
		}
	}
	ck.ackChecks += len(acks)
	ck.maxActive = max(ck.maxActive, s.activeTasks)
	if s.newest != nil {
		if s.newest.version < ck.maxVersion {
			ck.violate("%s: the newest version is %d, but version %d was seen before", label, s.newest.version, ck.maxVersion)
		}
		ck.maxVersion = max(ck.maxVersion, s.newest.version)
	}
	return s, acks
}

// afterCrash inspects the sidecar the killed process left (SQLite recovers
// the WAL on open; nothing else has touched it) and notes the file's text.
func (ck *checker) afterCrash(ctx context.Context, label string) crashState {
	b, err := os.ReadFile(ck.file)
	if err != nil {
		ck.violate("%s: the document is unreadable: %v", label, err)
	}
	st := crashState{file: string(b)}
	s, _ := ck.inspect(ctx, label, false)
	if s != nil {
		st.newest = s.newest
		if s.newest != nil && st.file != s.newest.content {
			// Killed between the rename of the new text and COMMIT: allowed,
			// provided the next start records the text (checked after it).
			ck.torn++
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(ck.file))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			ck.tempFiles[e.Name()] = true
		}
	}
	return st
}

// afterRestart checks the restarted room before the clients may continue.
func (ck *checker) afterRestart(ctx context.Context, label string, g *gen, pre crashState) {
	s, acks := ck.inspect(ctx, label, true)
	if s == nil || s.newest == nil {
		return
	}
	// The file's text is never lost: the start records it if it is new.
	if s.newest.content != pre.file {
		ck.violate("%s: the file held %d bytes (sha %s) at the crash, the newest version %d holds %d bytes (sha %s): text lost",
			label, len(pre.file), sha(pre.file)[:12], s.newest.version, len(s.newest.content), sha(s.newest.content)[:12])
	}
	if pre.newest != nil && pre.file != pre.newest.content {
		if s.newest.version != pre.newest.version+1 || s.newest.source != "external" || s.newest.participant != "" {
			ck.violate("%s: the file differed from version %d at start, but the newest version is %d (source %s, participant %q), not an external edit",
				label, pre.newest.version, s.newest.version, s.newest.source, s.newest.participant)
		}
	}
	ck.fileMatches(label, s)
	ck.viaAPI(ctx, label, g, s, acks[ck.apiFrom:])
	ck.apiFrom = len(acks)
}

// final checks everything once more with the clients stopped and the room
// still serving, every acknowledgement through the API included.
func (ck *checker) final(ctx context.Context, g *gen) {
	s, acks := ck.inspect(ctx, "end of run", true)
	if s == nil {
		return
	}
	ck.fileMatches("end of run", s)
	ck.viaAPI(ctx, "end of run", g, s, acks)
}

// afterStop checks the sidecar and the file after the graceful stop.
func (ck *checker) afterStop(ctx context.Context) {
	if s, _ := ck.inspect(ctx, "after the graceful stop", true); s != nil {
		ck.fileMatches("after the graceful stop", s)
	}
}

func (ck *checker) fileMatches(label string, s *snapshot) {
	b, err := os.ReadFile(ck.file)
	if err != nil {
		ck.violate("%s: the document is unreadable: %v", label, err)
		return
	}
	if s.newest != nil && string(b) != s.newest.content {
		ck.violate("%s: the file (%d bytes, sha %s) is not the newest version %d (%d bytes, source %s)",
			label, len(b), sha(string(b))[:12], s.newest.version, len(s.newest.content), s.newest.source)
	}
}

// apiReaders is how many API reads the checks run at once: more than the
// room's read pool has connections (8), as a burst of clients reconnecting
// after a restart would be.
const apiReaders = 16

// viaAPI checks acknowledgements through the API of generation g,
// apiReaders at a time, plus the document as the API serves it.
func (ck *checker) viaAPI(ctx context.Context, label string, g *gen, s *snapshot, acks []*ack) {
	var mu sync.Mutex
	// Several acknowledgements name the same handoff: with the clients held
	// back, one read of it per round answers all of them.
	var memo sync.Map // token + " " + path -> []byte
	get := func(token, path string, out any) error {
		key := token + " " + path
		if b, ok := memo.Load(key); ok {
			return json.Unmarshal(b.([]byte), out)
		}
		for {
			var raw json.RawMessage
			err := ck.w.c.do(ctx, g, ingress, token, "GET", path, nil, &raw)
			if err == nil {
				memo.Store(key, []byte(raw))
				return json.Unmarshal(raw, out)
			}
			if isTransport(err) && ctx.Err() == nil {
				mu.Lock()
				ck.stalled = true
				ck.stalledReads++
				mu.Unlock()
				return fmt.Errorf("no answer within %v (the room's read path stalled): %w", requestTimeout, err)
			}
			if !retryable(err) {
				return err
			}
		}
	}
	var wg sync.WaitGroup
	work := make(chan *ack)
	for i := 0; i < apiReaders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				mu.Lock()
				stalled := ck.stalled
				mu.Unlock()
				if stalled {
					continue // one stall is reported; do not wait for every read
				}
				v := a.verifyAPI(get, s)
				mu.Lock()
				for _, x := range v {
					ck.violate("%s: %s", label, x)
				}
				mu.Unlock()
			}
		}()
	}
	for _, a := range acks {
		work <- a
	}
	close(work)
	wg.Wait()

	var rd struct {
		Version int64  `json:"version"`
		Content string `json:"content"`
	}
	if err := get(ck.w.readerToken, "/workspace/read", &rd); err != nil {
		ck.violate("%s: GET /workspace/read: %v", label, err)
	} else if s.newest != nil && (rd.Version != s.newest.version || rd.Content != s.newest.content) {
		ck.violate("%s: the API serves version %d (%d bytes), the sidecar's newest is %d (%d bytes)",
			label, rd.Version, len(rd.Content), s.newest.version, len(s.newest.content))
	}
	var st struct {
		Version     int64  `json:"version"`
		ContentHash string `json:"content_hash"`
	}
	if err := get(ck.w.readerToken, "/workspace/status", &st); err != nil {
		ck.violate("%s: GET /workspace/status: %v", label, err)
	} else if s.newest != nil && (st.Version != s.newest.version || !strings.HasSuffix(st.ContentHash, s.newest.sha)) {
		ck.violate("%s: status says version %d hash %s, the sidecar %d %s", label, st.Version, st.ContentHash, s.newest.version, s.newest.sha)
	}
}

// kinds tallies the acknowledgements by kind, for the report.
func (ck *checker) kinds() string {
	m := map[ackKind]int{}
	for _, a := range ck.w.led.since(0) {
		m[a.kind]++
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
