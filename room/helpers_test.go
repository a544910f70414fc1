package room_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// fakeClock is the room's clock in tests: time moves only when a test says so.
type fakeClock = room.ManualClock

func newFakeClock() *fakeClock {
	return room.NewManualClock(time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC))
}

// recorder is the room's publisher in tests: it keeps every published batch.
type recorder struct {
	mu      sync.Mutex
	batches []listen.Batch
}

func (r *recorder) Publish(b listen.Batch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
}

// taskNotices returns, JSON-encoded, every task snapshot published for
// taskID, in publish order.
func (r *recorder) taskNotices(taskID string) []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []json.RawMessage
	for _, b := range r.batches {
		for _, m := range b.Messages {
			if m.Topic == actor.TaskTopic(taskID) {
				n, ok := m.Change.(room.TaskNotice)
				if !ok || n.TaskID != taskID {
					panic(fmt.Sprintf("unexpected change %#v on a task topic", m.Change))
				}
				b, err := json.Marshal(n.Task)
				if err != nil {
					panic(err)
				}
				out = append(out, b)
			}
		}
	}
	return out
}

// env is one room on a real sidecar file, run by the real actor.
type env struct {
	tb     testing.TB
	doc    string
	clock  *fakeClock // nil: the real clock
	limits room.Limits
	pub    *recorder
	batch  int  // the actor's MaxBatch; 0: its default
	ckpt   *int // Store.SetWALAutocheckpoint's pages; nil: not called (SQLite's own autocheckpoint)

	retention   room.Retention // the engine's retention policy (zero: keep everything)
	archive     *room.Archive  // the engine's archive; nil: none
	pruneEvery  time.Duration  // the actor's PruneEvery; 0: its default
	pruneBudget int            // the actor's PruneBudget; 0: its default

	r     *actor.Room
	store *room.Store
	eng   *room.Engine
}

type envOption func(*env)

// withLimits changes the room's limits before it opens.
func withLimits(f func(*room.Limits)) envOption { return func(e *env) { f(&e.limits) } }

// withMaxBatch sets the actor's commands per transaction (1: no group commit).
func withMaxBatch(n int) envOption { return func(e *env) { e.batch = n } }

// withWALAutocheckpoint opens the store as ce serve does with
// --wal-autocheckpoint pages: the writer never checkpoints, a checkpointer
// does past pages (0: nothing does).
func withWALAutocheckpoint(pages int) envOption { return func(e *env) { e.ckpt = &pages } }

// withRetention gives the room a retention policy.
func withRetention(r room.Retention) envOption { return func(e *env) { e.retention = r } }

// withPruneEvery sets how long the sweeper waits between prune passes.
func withPruneEvery(d time.Duration) envOption { return func(e *env) { e.pruneEvery = d } }

// withRealClock runs the room on time.Now (benchmarks).
func withRealClock() envOption { return func(e *env) { e.clock = nil } }

const testDoc = "# Idea\n\nhello\n\n## Goals\n\nship it\n\n## Risks\n\nnone yet\n"

func newEnv(tb testing.TB, opts ...envOption) *env {
	tb.Helper()
	dir := tb.TempDir()
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(testDoc), 0o644); err != nil {
		tb.Fatal(err)
	}
	e := envAt(tb, doc)
	for _, o := range opts {
		o(e)
	}
	e.open()
	tb.Cleanup(e.close)
	return e
}

// envAt is an env with the defaults on the document at doc, not yet
// opened: newEnv's, or a room opened again on files a test made itself.
func envAt(tb testing.TB, doc string) *env {
	return &env{tb: tb, doc: doc, clock: newFakeClock(), limits: room.Defaults(), pub: &recorder{}}
}

// open starts the room on the env's files (first open or a restart).
func (e *env) open() {
	e.tb.Helper()
	ctx := context.Background()
	eng, err := room.NewEngine(e.doc, e.limits)
	if err != nil {
		e.tb.Fatal(err)
	}
	if e.clock != nil {
		eng.Clock = e.clock.Now
	}
	eng.Retention, eng.Archive = e.retention, e.archive
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		e.tb.Fatal(err)
	}
	if e.ckpt != nil {
		if err := st.SetWALAutocheckpoint(ctx, *e.ckpt); err != nil {
			st.Close()
			e.tb.Fatal(err)
		}
	}
	r, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st, Publisher: e.pub, HostName: "host",
		MaxSweepWait: time.Hour, MaxBatch: e.batch, CPUSampleEvery: 1, PruneEvery: e.pruneEvery, PruneBudget: e.pruneBudget})
	if err != nil {
		st.Close()
		e.tb.Fatal(err)
	}
	e.r, e.store, e.eng = r, st, eng
}

// close stops the room and closes the sidecar (idempotent).
func (e *env) close() {
	if e.r == nil {
		return
	}
	if err := e.r.Close(context.Background()); err != nil {
		e.tb.Errorf("closing the room: %v", err)
	}
	if err := e.store.Close(); err != nil {
		e.tb.Errorf("closing the store: %v", err)
	}
	e.r, e.store, e.eng = nil, nil, nil
}

// restart closes the room and opens it again on the same files: a new
// engine, a new actor, the same sidecar.
func (e *env) restart() {
	e.tb.Helper()
	e.close()
	e.open()
}

// op is the local operator (the host, trusted).
func (e *env) op() room.Principal { return room.Operator(e.eng.HostID) }

// join admits a new participant holding exactly caps, the way a remote agent
// joins: an invitation created by the operator, then Join.
func (e *env) join(name string, caps ...room.Capability) room.Principal {
	e.tb.Helper()
	names := make([]string, len(caps))
	for i, c := range caps {
		names[i] = string(c)
	}
	g, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.SessionGrant, error) {
		inv, err := eng.CreateInvite(tx, room.Operator(eng.HostID), room.InviteInput{Capabilities: names})
		if err != nil {
			return room.SessionGrant{}, err
		}
		return eng.Join(tx, room.JoinInput{Secret: inv.Token, Name: name, Kind: "agent", Transport: "test"})
	})
	if err != nil {
		e.tb.Fatalf("join %s: %v", name, err)
	}
	parsed, err := room.ParseCaps(g.Capabilities)
	if err != nil {
		e.tb.Fatal(err)
	}
	return room.Principal{ParticipantID: g.ParticipantID, SessionRef: g.SessionRef, Caps: parsed}
}

var agentCaps = []room.Capability{room.CapRead, room.CapObserve, room.CapPropose, room.CapCheckout, room.CapCommit}

func agent(extra ...room.Capability) []room.Capability {
	return append(append([]room.Capability{}, agentCaps...), extra...)
}

// do runs fn as one command through the actor.
func do[T any](e *env, fn func(eng *room.Engine, tx *room.Tx) (T, error)) (T, error) {
	eng := e.eng
	return actor.Do(context.Background(), e.r, "test", func(tx *room.Tx) (T, error) { return fn(eng, tx) })
}

// rawSQL runs one statement as a command of its own, through the actor: a
// write the engine's methods would never make, as another writer would.
func (e *env) rawSQL(query string, args ...any) {
	e.tb.Helper()
	if _, err := actor.Do(context.Background(), e.r, "raw", func(tx *room.Tx) (struct{}, error) {
		_, err := tx.Querier().ExecContext(tx.Context(), query, args...)
		return struct{}{}, err
	}); err != nil {
		e.tb.Fatal(err)
	}
}

// read runs fn on a read snapshot.
func read[T any](e *env, fn func(eng *room.Engine, q room.Querier) (T, error)) (T, error) {
	eng := e.eng
	return actor.Read(context.Background(), e.r, func(q room.Querier) (T, error) { return fn(eng, q) })
}

type none = struct{}

func (e *env) create(p room.Principal, in room.CreateHandoffInput) (room.CreateHandoffResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.CreateHandoffResult, error) {
		return eng.CreateHandoff(tx, p, in)
	})
}

func (e *env) accept(p room.Principal, id string) (room.Handoff, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
		return eng.AcceptHandoff(tx, p, room.HandoffIDInput{HandoffID: id})
	})
}

func (e *env) requestInput(p room.Principal, id string, reqs ...room.InputRequestSpec) (room.Handoff, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
		return eng.RequestInput(tx, p, room.RequestInputInput{HandoffID: id, Requests: reqs})
	})
}

func (e *env) answer(p room.Principal, taskID string, responses map[string]json.RawMessage) error {
	_, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		return eng.UpdateTask(tx, p, room.UpdateTaskInput{TaskID: taskID, InputResponses: responses})
	})
	return err
}

func (e *env) complete(p room.Principal, id string, res room.ResultInput) (room.Handoff, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
		return eng.CompleteHandoff(tx, p, room.CompleteInput{HandoffID: id, Result: res})
	})
}

func (e *env) approve(p room.Principal, id, note string) (room.Handoff, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
		return eng.ApproveHandoff(tx, p, room.DecideInput{HandoffID: id, Note: note})
	})
}

func (e *env) reject(p room.Principal, id, note string) (room.Handoff, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
		return eng.RejectHandoff(tx, p, room.DecideInput{HandoffID: id, Note: note})
	})
}

func (e *env) cancel(p room.Principal, taskID string) error {
	_, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		_, err := eng.CancelTask(tx, p, room.TaskIDInput{TaskID: taskID})
		return none{}, err
	})
	return err
}

func (e *env) getHandoff(p room.Principal, id string) (room.Handoff, error) {
	return read(e, func(eng *room.Engine, q room.Querier) (room.Handoff, error) {
		return eng.GetHandoff(context.Background(), q, p, room.HandoffIDInput{HandoffID: id})
	})
}

func (e *env) getTask(p room.Principal, id string) (room.DetailedTask, error) {
	return read(e, func(eng *room.Engine, q room.Querier) (room.DetailedTask, error) {
		return eng.GetTask(context.Background(), q, p, room.TaskIDInput{TaskID: id})
	})
}

func (e *env) sweep() {
	e.tb.Helper()
	if err := e.r.Sweep(context.Background()); err != nil {
		e.tb.Fatal(err)
	}
}

// barrier returns once everything committed before it has been published:
// the writer publishes a batch before it takes the next command.
func (e *env) barrier() {
	e.tb.Helper()
	if _, err := do(e, func(*room.Engine, *room.Tx) (none, error) { return none{}, nil }); err != nil {
		e.tb.Fatal(err)
	}
}

// wantKind fails unless err is a domain error of kind k.
func wantKind(tb testing.TB, err error, k room.Kind) {
	tb.Helper()
	if got := room.ErrorKind(err); err == nil || got != k {
		tb.Fatalf("got error %v (kind %q), want kind %q", err, got, k)
	}
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// dump renders every row a query returns, column by column, so two dumps
// are equal exactly when the rows are.
func (e *env) dump(query string, args ...any) string {
	e.tb.Helper()
	rows, err := e.store.Reader.Query(query, args...)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		e.tb.Fatal(err)
	}
	var b strings.Builder
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			e.tb.Fatal(err)
		}
		for i, c := range cols {
			v := vals[i]
			if bs, ok := v.([]byte); ok {
				v = fmt.Sprintf("%x", bs)
			}
			fmt.Fprintf(&b, "%s=%v|", c, v)
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		e.tb.Fatal(err)
	}
	return b.String()
}

// stateDump is every handoff, task and input row in the room.
func (e *env) stateDump() string {
	return e.dump(`SELECT * FROM handoffs ORDER BY handoff_id`) + "--\n" +
		e.dump(`SELECT * FROM tasks ORDER BY task_id`) + "--\n" +
		e.dump(`SELECT * FROM task_inputs ORDER BY task_id, request_key`)
}

func (e *env) scalar(query string, args ...any) int64 {
	e.tb.Helper()
	var v sql.NullInt64
	if err := e.store.Reader.QueryRow(query, args...).Scan(&v); err != nil {
		e.tb.Fatal(err)
	}
	return v.Int64
}

func (e *env) lastEventID() int64 { return e.scalar(`SELECT max(event_id) FROM events`) }

type eventRow struct {
	ID        int64
	Type      string
	HandoffID sql.NullString
	TaskID    sql.NullString
	ActorID   sql.NullString
	Payload   string
}

// eventsAfter lists the event rows written after id, oldest first.
func (e *env) eventsAfter(id int64) []eventRow {
	e.tb.Helper()
	rows, err := e.store.Reader.Query(`SELECT event_id, event_type, handoff_id, task_id, actor_id, payload_json
		FROM events WHERE event_id > ? ORDER BY event_id`, id)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var r eventRow
		if err := rows.Scan(&r.ID, &r.Type, &r.HandoffID, &r.TaskID, &r.ActorID, &r.Payload); err != nil {
			e.tb.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func types(evs []eventRow) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// eventIDs is the ids of evs, in order.
func eventIDs(evs []room.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func strOf(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
