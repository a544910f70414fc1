package actor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// recorder keeps every published batch, in order.
type recorder struct {
	mu      sync.Mutex
	batches []listen.Batch
}

func (r *recorder) Publish(b listen.Batch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
}

func (r *recorder) events(t *testing.T) []int64 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for _, b := range r.batches {
		for _, m := range b.Messages {
			if m.Topic != EventsTopic {
				continue
			}
			ev, ok := m.Change.(room.Event)
			if !ok {
				t.Fatalf("change %#v on the events topic, want a room.Event", m.Change)
			}
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

type testRoom struct {
	*Room
	store *room.Store
	pub   *recorder
	doc   string
}

func openRoom(t *testing.T, mod func(*Config)) *testRoom {
	t.Helper()
	dir := t.TempDir()
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte("# Idea\n\nhello\n\n## Goals\n\nship\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return openRoomAt(t, doc, mod)
}

func openRoomAt(t *testing.T, doc string, mod func(*Config)) *testRoom {
	t.Helper()
	ctx := context.Background()
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	pub := &recorder{}
	cfg := Config{Engine: eng, Store: st, Publisher: pub, HostName: "alice"}
	if mod != nil {
		mod(&cfg)
	}
	r, err := Open(ctx, cfg)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	tr := &testRoom{Room: r, store: st, pub: pub, doc: doc}
	t.Cleanup(func() {
		r.Close(context.Background())
		st.Close()
	})
	return tr
}

func count(t *testing.T, tr *testRoom, query string, args ...any) int {
	t.Helper()
	var n int
	if err := tr.store.Reader.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func invite(ctx context.Context, r *Room) (room.InviteGrant, error) {
	return Do(ctx, r, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
		return r.Engine().CreateInvite(tx, room.Operator(r.Engine().HostID), room.InviteInput{})
	})
}

// join invites (with these capabilities; the default set when none) and
// joins one participant through the writer, and returns its session and
// the principal its bearer would authenticate as.
func join(t *testing.T, tr *testRoom, caps ...string) (room.SessionGrant, room.Principal) {
	t.Helper()
	ctx := context.Background()
	eng := tr.Engine()
	g, err := Do(ctx, tr.Room, "join", func(tx *room.Tx) (room.SessionGrant, error) {
		inv, err := eng.CreateInvite(tx, room.Operator(eng.HostID), room.InviteInput{Capabilities: caps})
		if err != nil {
			return room.SessionGrant{}, err
		}
		return eng.Join(tx, room.JoinInput{Secret: inv.Token, Name: "bot"})
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := room.ParseCaps(g.Capabilities)
	if err != nil {
		t.Fatal(err)
	}
	return g, room.Principal{ParticipantID: g.ParticipantID, Caps: c}
}

// block occupies the writer until release is closed, so the commands queued
// meanwhile are run as one batch.
func block(t *testing.T, r *Room) (release func()) {
	t.Helper()
	started := make(chan struct{})
	gate := make(chan struct{})
	go Do(context.Background(), r, "block", func(tx *room.Tx) (struct{}, error) {
		close(started)
		<-gate
		return struct{}{}, nil
	})
	<-started
	return func() { close(gate) }
}

// barrier returns once every batch committed before it has been published:
// the writer publishes a batch before it takes the next command.
func barrier(t *testing.T, r *Room) {
	t.Helper()
	if _, err := Do(context.Background(), r, "barrier", func(tx *room.Tx) (struct{}, error) { return struct{}{}, nil }); err != nil {
		t.Fatal(err)
	}
}

func waitQueued(t *testing.T, r *Room, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.cmds) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d commands queued", len(r.cmds), n)
		}
		runtime.Gosched()
	}
}

func TestBatch_FailingCommandRollsBackOnlyItself(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	before := count(t, tr, `SELECT count(*) FROM invites`)
	eventsBefore := len(tr.pub.events(t))

	release := block(t, tr.Room)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				// Writes an invite and its event, then fails: both must vanish.
				_, errs[i] = Do(ctx, tr.Room, "fails", func(tx *room.Tx) (struct{}, error) {
					if _, err := tr.Engine().CreateInvite(tx, room.Operator(tr.Engine().HostID), room.InviteInput{}); err != nil {
						return struct{}{}, err
					}
					return struct{}{}, room.Errorf(room.KindInvalidRequest, "deliberate failure")
				})
				return
			}
			_, errs[i] = invite(ctx, tr.Room)
		}()
		waitQueued(t, tr.Room, i+1)
	}
	batchesBefore := tr.Stats().Batches.Load()
	release()
	wg.Wait()
	barrier(t, tr.Room)

	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("healthy commands failed: %v, %v", errs[0], errs[2])
	}
	if room.ErrorKind(errs[1]) != room.KindInvalidRequest {
		t.Fatalf("failing command: got %v, want invalid_request", errs[1])
	}
	if got := tr.Stats().Batches.Load() - batchesBefore; got != 3 { // the blocker's batch, then ours
		t.Fatalf("batches committed = %d, want 2 (blocker, the three sharing one, barrier)", got)
	}
	if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != 2 {
		t.Fatalf("invites added = %d, want 2", got)
	}
	if got := len(tr.pub.events(t)) - eventsBefore; got != 2 {
		t.Fatalf("events published = %d, want 2 (nothing from the failed command)", got)
	}
	if n := count(t, tr, `SELECT count(*) FROM events WHERE event_type = 'invite.created'`); n != 2 {
		t.Fatalf("invite.created rows = %d, want 2", n)
	}
}

func TestPublish_InCommitOrder(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := invite(ctx, tr.Room); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	barrier(t, tr.Room)
	ids := tr.pub.events(t)
	if len(ids) < 200 {
		t.Fatalf("published %d events, want at least 200", len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("event %d published after %d: not commit order", ids[i], ids[i-1])
		}
	}
}

func TestDo_CallerContextEndsWhileQueued(t *testing.T) {
	tr := openRoom(t, nil)
	release := block(t, tr.Room)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := invite(ctx, tr.Room)
		errc <- err
	}()
	waitQueued(t, tr.Room, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	before := count(t, tr, `SELECT count(*) FROM invites`)
	release()
	// The writer skips the abandoned command and keeps serving others.
	if _, err := invite(context.Background(), tr.Room); err != nil {
		t.Fatalf("the actor is blocked or broken after an abandoned call: %v", err)
	}
	if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != 1 {
		t.Fatalf("invites added = %d, want 1 (the abandoned one must not run)", got)
	}
}

func TestDo_FullQueueAnswersOverloaded(t *testing.T) {
	tr := openRoom(t, func(c *Config) { c.QueueLen = 2 })
	release := block(t, tr.Room)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go invite(ctx, tr.Room)
	}
	waitQueued(t, tr.Room, 2)
	_, err := invite(ctx, tr.Room)
	if room.ErrorKind(err) != room.KindOverloaded {
		t.Fatalf("got %v, want overloaded", err)
	}
	if tr.Stats().Overloaded.Load() != 1 {
		t.Fatalf("overloaded count = %d, want 1", tr.Stats().Overloaded.Load())
	}
}

func TestClose_AnswersEveryQueuedCommand(t *testing.T) {
	tr := openRoom(t, nil)
	release := block(t, tr.Room)
	const n = 100
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := invite(context.Background(), tr.Room)
			errs <- err
		}()
		waitQueued(t, tr.Room, i+1)
	}
	closed := make(chan error, 1)
	go func() { closed <- tr.Close(context.Background()) }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a queued command got %v; every queued command must run before stop", err)
		}
	}
	if got := count(t, tr, `SELECT count(*) FROM invites`); got != n {
		t.Fatalf("invites = %d, want %d committed at shutdown", got, n)
	}
	if _, err := invite(context.Background(), tr.Room); room.ErrorKind(err) != room.KindUnavailable {
		t.Fatalf("after Close: got %v, want unavailable", err)
	}
}

func TestRunOne_PanicRollsBackAndWriterSurvives(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	before := count(t, tr, `SELECT count(*) FROM invites`)
	_, err := Do(ctx, tr.Room, "panics", func(tx *room.Tx) (struct{}, error) {
		if _, err := tr.Engine().CreateInvite(tx, room.Operator(tr.Engine().HostID), room.InviteInput{}); err != nil {
			return struct{}{}, err
		}
		panic("boom")
	})
	if room.ErrorKind(err) != room.KindInternal {
		t.Fatalf("got %v, want internal", err)
	}
	if _, err := invite(ctx, tr.Room); err != nil {
		t.Fatal(err)
	}
	if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != 1 {
		t.Fatalf("invites added = %d, want 1", got)
	}
}

func TestRing_KeepsNewest(t *testing.T) {
	tr := openRoom(t, func(c *Config) { c.Engine.Limits.EventRing = 50 })
	ctx := context.Background()
	for range 120 {
		if _, err := invite(ctx, tr.Room); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, tr, `SELECT count(*) FROM events`); n != 50 {
		t.Fatalf("ring holds %d events, want 50", n)
	}
	if n := count(t, tr, `SELECT max(event_id) - min(event_id) + 1 FROM events`); n != 50 {
		t.Fatalf("ring is not the newest contiguous 50 ids (span %d)", n)
	}
}

func TestDo_CommitAndFailKeepsTheChangeAndReturnsTheError(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	before := count(t, tr, `SELECT count(*) FROM invites`)
	_, err := Do(ctx, tr.Room, "refuse-but-keep", func(tx *room.Tx) (struct{}, error) {
		if _, err := tr.Engine().CreateInvite(tx, room.Operator(tr.Engine().HostID), room.InviteInput{}); err != nil {
			return struct{}{}, err
		}
		tx.CommitAndFail(room.Errorf(room.KindStaleVersion, "stale"))
		return struct{}{}, nil
	})
	if room.ErrorKind(err) != room.KindStaleVersion {
		t.Fatalf("got %v, want the deferred stale_version", err)
	}
	barrier(t, tr.Room)
	if got := count(t, tr, `SELECT count(*) FROM invites`) - before; got != 1 {
		t.Fatalf("invites added = %d, want 1: the change must commit", got)
	}
	if tr.Stats().Failed.Load() != 0 {
		// A refusal that commits is not a rolled-back command.
		t.Logf("failed counter = %d", tr.Stats().Failed.Load())
	}
}

// TestFileWriteIsUndoneWhenTheCommandFails: a command that rewrote the
// document and then failed must leave the file as it was, so the file never
// runs ahead of the sidecar (and no "external edit" appears afterwards).
func TestFileWriteIsUndoneWhenTheCommandFails(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	before, err := os.ReadFile(tr.doc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Do(ctx, tr.Room, "commit-then-fail", func(tx *room.Tx) (struct{}, error) {
		v := int64(1)
		text := "# Replaced\n"
		if _, err := tr.Engine().Commit(tx, room.Operator(tr.Engine().HostID), room.CommitInput{BaseVersion: &v, Content: &text, Summary: "x"}); err != nil {
			return struct{}{}, err
		}
		if got, _ := os.ReadFile(tr.doc); string(got) != text {
			t.Errorf("inside the command the file holds %q, want the new text", got)
		}
		return struct{}{}, room.Errorf(room.KindInvalidRequest, "fail after the write")
	})
	if room.ErrorKind(err) != room.KindInvalidRequest {
		t.Fatalf("got %v", err)
	}
	after, _ := os.ReadFile(tr.doc)
	if string(after) != string(before) {
		t.Fatalf("the file was not restored: %q", after)
	}
	if err := tr.Sweep(ctx); err != nil { // a sync would record a leftover edit
		t.Fatal(err)
	}
	if n := count(t, tr, `SELECT count(*) FROM versions`); n != 1 {
		t.Fatalf("versions = %d, want 1 (no commit, no external edit)", n)
	}
}

// TestDo_AbandonedReplyReachesNoOtherCaller: reply channels are reused
// (Room.replies), and the writer still answers a command whose caller gave
// up. That answer must land in the abandoned call's own channel and never in
// a later caller's: each later caller gets its own command's answer.
func TestDo_AbandonedReplyReachesNoOtherCaller(t *testing.T) {
	tr := openRoom(t, nil)
	for round := range 20 {
		release := block(t, tr.Room)
		ctx, cancel := context.WithCancel(context.Background())
		abandoned := make(chan error, 1)
		go func() {
			_, err := Do(ctx, tr.Room, "abandoned", func(tx *room.Tx) (int, error) {
				return -1, errors.New("the abandoned command ran")
			})
			abandoned <- err
		}()
		waitQueued(t, tr.Room, 1)
		cancel()
		if err := <-abandoned; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: abandoned call got %v, want context.Canceled", round, err)
		}
		// Queued behind the abandoned command: the writer answers both in
		// one batch, the abandoned one first.
		got := make(chan error, 1)
		go func() {
			v, err := Do(context.Background(), tr.Room, "later", func(tx *room.Tx) (int, error) { return round, nil })
			if err == nil && v != round {
				err = errors.New("the later call got another command's result")
			}
			got <- err
		}()
		waitQueued(t, tr.Room, 2)
		release()
		if err := <-got; err != nil {
			t.Fatalf("round %d: the later call was answered %v, want its own result", round, err)
		}
	}
}
