package actor

import (
	"context"
	"reflect"
	"testing"

	"github.com/commonroom/ce/room"
)

// Ping is readiness' question to the writer: it must be answered by the
// writer itself, cost no transaction, count as no command, and fail once
// the room has stopped.
func TestPingIsAnsweredByTheWriterWithoutATransaction(t *testing.T) {
	tr := openRoom(t, nil)
	ctx := context.Background()
	st := tr.Stats()
	var empty uint64 // statements of an empty command's turn: BEGIN, COMMIT, the sweeper's re-arm…
	for range 2 {    // the writer arms its sweeper once before its first turn
		turns, s0 := st.Turns.Load(), st.Statements.Load()
		if _, err := Do(ctx, tr.Room, "empty", func(tx *room.Tx) (struct{}, error) { return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
		settle(tr.Room, turns)
		empty = st.Statements.Load() - s0
	}
	cmds, stmts, batches := st.Commands.Load(), st.Statements.Load(), st.Batches.Load()
	turns := st.Turns.Load()
	if err := tr.Ping(ctx); err != nil {
		t.Fatalf("ping of a running room: %v", err)
	}
	settle(tr.Room, turns)
	// The turn re-arms the sweeper (one query); no transaction is opened.
	if st.Commands.Load() != cmds || st.Batches.Load() != batches || st.Statements.Load()-stmts >= empty {
		t.Errorf("a ping counted commands %d→%d, batches %d→%d, statements +%d (an empty command's turn: +%d); want no command and no transaction",
			cmds, st.Commands.Load(), batches, st.Batches.Load(), st.Statements.Load()-stmts, empty)
	}
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Ping(ctx); room.ErrorKind(err) != room.KindUnavailable {
		t.Errorf("ping of a stopped room = %v, want unavailable", err)
	}
}

func TestHistogramSnapshotIsCumulative(t *testing.T) {
	h := NewHistogram(1, 2, 4)
	for _, v := range []float64{0.5, 1, 1.5, 3, 9, 9} {
		h.Observe(v)
	}
	got := h.Snapshot()
	want := HistogramSnapshot{Bounds: []float64{1, 2, 4}, Cumulative: []uint64{2, 3, 4}, Count: 6, Sum: 24}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot = %+v, want %+v", got, want)
	}
	var none *Histogram
	none.Observe(1) // a room's Stats before Open: nothing, no panic
	if s := none.Snapshot(); s.Count != 0 {
		t.Errorf("a nil histogram counted %d", s.Count)
	}
}
