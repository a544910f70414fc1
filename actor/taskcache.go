package actor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/commonroom/ce/room"
)

// Agents poll tasks/get, and most polls find the task as it was: the cache
// keeps the latest committed detailed task per id so a poll costs no
// SQLite. The writer is the only one that changes tasks, so it keeps the
// cache honest: after each COMMIT, before anyone is answered or notified, it
// drops every task the batch changed, and after a purge (which deletes rows
// without a notice) it drops them all.
//
// A reader that misses reads the sidecar and stores what it read only if no
// batch committed since it looked (the generation is unchanged), so a read
// that raced a commit can never leave the older version behind.

// taskCacheMax bounds the cache; past it the cache starts over.
const taskCacheMax = 4096

type taskCache struct {
	mu    sync.Mutex
	gen   uint64
	tasks map[string]*taskEntry
}

// taskEntry is one cached version of a task. A changed task gets a new
// entry, so whatever a door memoized on an entry belongs to that version.
type taskEntry struct {
	t    room.DetailedTask
	memo Memo
}

// Memo is a slot beside one cached answer (a version of a task, a
// RecordCache answer) where a door keeps what it derives from that answer
// alone (the MCP door: its encoded result), so a poll that finds the answer
// unchanged does not derive it again. The room never reads it. An answer
// that was not cached (read while a batch committed) comes with a memo of
// its own that nobody else sees.
type Memo struct{ v atomic.Value }

// Load returns what a door stored, or nil.
func (m *Memo) Load() any { return m.v.Load() }

// Store keeps v for this version of the task; every Store must pass the same
// concrete type.
func (m *Memo) Store(v any) { m.v.Store(v) }

func (c *taskCache) get(id string) (e *taskEntry, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok = c.tasks[id]
	return e, c.gen, ok
}

// put caches t as read at generation gen and returns its entry; the entry is
// not cached when a batch committed since (it may be stale).
func (c *taskCache) put(id string, t room.DetailedTask, gen uint64) *taskEntry {
	e := &taskEntry{t: t}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return e // a batch committed while this was read: it may be stale
	}
	if c.tasks == nil || len(c.tasks) >= taskCacheMax {
		c.tasks = make(map[string]*taskEntry, 64)
	}
	c.tasks[id] = e
	return e
}

// forget drops the given tasks, or every task when all is set, and starts
// a new generation.
func (c *taskCache) forget(ids []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if all {
		c.tasks = nil
		return
	}
	for _, id := range ids {
		delete(c.tasks, id)
	}
}

// Task is tasks/get: the detailed task for p, from the cache when the writer
// has not changed it since it was read, from the read pool otherwise. An
// unknown task and one p may not see give the same error. The value shares
// its maps with the cache: callers must not modify it.
func (r *Room) Task(ctx context.Context, p room.Principal, id string) (room.DetailedTask, error) {
	t, _, err := r.TaskMemo(ctx, p, id)
	return t, err
}

// TaskMemo is Task with the memo of the version it answers with, for a door
// that derives the same bytes from every poll of an unchanged task.
func (r *Room) TaskMemo(ctx context.Context, p room.Principal, id string) (room.DetailedTask, *Memo, error) {
	e, gen, ok := r.tasks.get(id)
	if !ok {
		// One statement about a record the file does not decide: no read
		// transaction, and no look at the document file first (Read's).
		t, err := r.eng.TaskRecord(ctx, r.reads.Pool(), id)
		if err != nil {
			return room.DetailedTask{}, nil, err
		}
		e = r.tasks.put(id, t, gen)
	}
	if err := room.TaskVisibleTo(p, e.t); err != nil {
		return room.DetailedTask{}, nil, err
	}
	return e.t, &e.memo, nil
}
