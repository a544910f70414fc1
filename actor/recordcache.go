package actor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/commonroom/ce/room"
)

// A read whose answer depends only on the sidecar (not on the clock, not on
// the Markdown file) gives the same answer until the writer commits again.
// Agents poll handoff_get as they poll tasks/get, and in a room that is not
// changing, every poll ran the same statement again. A RecordCache keeps
// such answers for the current commit: it counts commits by the writer's
// Batches counter, which the writer moves right after each COMMIT and
// before it answers anyone, so a caller answered for a write never reads an
// answer cached before it. A reader stores what it read only if no commit
// landed since it looked at the counter (the task cache's rule), so an
// answer read from an older snapshot is never kept under a newer count.
// Every commit empties it: under a steady stream of writes it is simply
// missed, and the read costs what it did.

// recordCacheMax bounds a RecordCache; past it the cache starts over.
const recordCacheMax = 4096

// RecordCache holds answers of ReadRecordCached for one room until its next
// commit. The zero value is ready; a door keeps one per room it serves.
type RecordCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]*recordEntry
}

// recordEntry is one kept answer and its memo.
type recordEntry struct {
	v    any
	memo Memo
}

func (c *RecordCache) get(key string, gen uint64) (*recordEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return nil, false
	}
	v, ok := c.m[key]
	return v, ok
}

// put keeps v, read at commit count gen, and returns its entry; the entry is
// not kept when a commit landed since (it may be stale).
func (c *RecordCache) put(key string, v any, gen uint64, commits *atomic.Uint64) *recordEntry {
	e := &recordEntry{v: v}
	c.mu.Lock()
	defer c.mu.Unlock()
	if commits.Load() != gen {
		return e // a commit landed while this was read: it may be stale
	}
	if c.gen != gen || c.m == nil || len(c.m) >= recordCacheMax {
		c.gen, c.m = gen, make(map[string]*recordEntry, 64)
	}
	c.m[key] = e
	return e
}

// ReadRecordCached runs fn, a read that is a single statement about records
// the Markdown file does not decide (a handoff), on the read pool outside
// any transaction: one statement is one snapshot without a BEGIN and a
// ROLLBACK around it, and such a read has no reason to look at the
// document file first as Read does (a read of two statements must use Read,
// or the two may see different commits). Its answer must be a function of
// the sidecar and of key alone (key must name everything else the answer
// depends on: the record, and the principal's part in it); c keeps it until
// the next commit. A failed read is not kept. The answer may be shared with
// other callers: they must not modify it. The memo is the answer's (nil
// when c is nil, which reads every time).
func ReadRecordCached[T any](ctx context.Context, r *Room, c *RecordCache, key string, fn func(q room.Querier) (T, error)) (T, *Memo, error) {
	if c == nil {
		v, err := fn(r.reads.Pool())
		return v, nil, err
	}
	gen := r.stats.Batches.Load()
	if e, ok := c.get(key, gen); ok {
		return e.v.(T), &e.memo, nil
	}
	v, err := fn(r.reads.Pool())
	if err != nil {
		return v, nil, err
	}
	return v, &c.put(key, v, gen, &r.stats.Batches).memo, nil
}
