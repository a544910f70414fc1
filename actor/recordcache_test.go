package actor

import (
	"context"
	"testing"

	"github.com/commonroom/ce/room"
)

// Through the real writer: a RecordCache answer is served until the next
// commit and never after it; a read that a commit overtook is not kept; a
// failed read is not kept; and keys keep answers apart.
func TestRecordCacheHoldsAnAnswerUntilTheNextCommit(t *testing.T) {
	ctx := context.Background()
	tr := openRoom(t, nil)
	eng := tr.Engine()
	_, owner := join(t, tr, "read", "propose")
	var c RecordCache
	reads := 0
	read := func(key string, fn func(q room.Querier) (int, error)) (int, error) {
		v, _, err := ReadRecordCached(ctx, tr.Room, &c, key, func(q room.Querier) (int, error) { reads++; return fn(q) })
		return v, err
	}
	count := func(q room.Querier) (int, error) {
		var n int
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM handoffs`).Scan(&n)
		return n, err
	}
	commit := func() {
		t.Helper()
		if _, err := Do(ctx, tr.Room, "create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
			return eng.CreateHandoff(tx, owner, room.CreateHandoffInput{Summary: "one more"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(key string, n, wantReads int) {
		t.Helper()
		got, err := read(key, count)
		if err != nil || got != n || reads != wantReads {
			t.Fatalf("%s: %d (%v) after %d reads; want %d after %d", key, got, err, reads, n, wantReads)
		}
	}
	t.Run("a second read before any commit is served from the cache", func(t *testing.T) {
		want("a", 0, 1)
		want("a", 0, 1)
		want("b", 0, 2) // another key is another answer
	})
	t.Run("the first read after a commit reads the sidecar", func(t *testing.T) {
		commit()
		want("a", 1, 3)
		want("a", 1, 3)
	})
	t.Run("a read a commit overtook is not kept", func(t *testing.T) {
		commit()
		got, err := read("a", func(q room.Querier) (int, error) {
			n, err := count(q)
			commit() // lands while this read is under way
			return n, err
		})
		if err != nil || got != 2 {
			t.Fatalf("%d, %v", got, err)
		}
		want("a", 3, 5) // not the 2 read while the third commit landed
	})
	t.Run("a failed read is not kept", func(t *testing.T) {
		fail := func(q room.Querier) (int, error) { return 0, room.Errorf(room.KindNotFound, "no") }
		if _, err := read("c", fail); err == nil {
			t.Fatal("no error")
		}
		want("c", 3, 7)
	})
}
