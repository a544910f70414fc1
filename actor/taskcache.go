package actor

import (
	"context"
	"sync"

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
	tasks map[string]room.DetailedTask
}

func (c *taskCache) get(id string) (t room.DetailedTask, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok = c.tasks[id]
	return t, c.gen, ok
}

func (c *taskCache) put(id string, t room.DetailedTask, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // a batch committed while this was read: it may be stale
	}
	if c.tasks == nil || len(c.tasks) >= taskCacheMax {
		c.tasks = make(map[string]room.DetailedTask, 64)
	}
	c.tasks[id] = t
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
	t, gen, ok := r.tasks.get(id)
	if !ok {
		// One statement about a record the file does not decide: no read
		// transaction, and no look at the document file first (Read's).
		var err error
		t, err = r.eng.TaskRecord(ctx, r.reads.Pool(), id)
		if err != nil {
			return room.DetailedTask{}, err
		}
		r.tasks.put(id, t, gen)
	}
	if err := room.TaskVisibleTo(p, t); err != nil {
		return room.DetailedTask{}, err
	}
	return t, nil
}
