package actor

import (
	"context"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

func TestTaskCacheRules(t *testing.T) {
	task := func(id string) room.DetailedTask { return room.DetailedTask{TaskID: id, Status: room.TaskWorking} }
	t.Run("a read kept in the generation it began is served", func(t *testing.T) {
		var c taskCache
		_, gen, _ := c.get("a")
		c.put("a", task("a"), gen)
		if _, _, ok := c.get("a"); !ok {
			t.Fatal("not kept")
		}
	})
	t.Run("a read that raced a commit is not kept", func(t *testing.T) {
		var c taskCache
		_, gen, _ := c.get("a")
		c.forget([]string{"b"}, false) // a batch committed meanwhile, whatever it changed
		c.put("a", task("a"), gen)
		if _, _, ok := c.get("a"); ok {
			t.Fatal("a possibly stale read was kept")
		}
	})
	t.Run("forgetting names drops only them", func(t *testing.T) {
		var c taskCache
		for _, id := range []string{"a", "b"} {
			_, gen, _ := c.get(id)
			c.put(id, task(id), gen)
		}
		c.forget([]string{"a"}, false)
		_, _, okA := c.get("a")
		_, _, okB := c.get("b")
		if okA || !okB {
			t.Fatalf("after forgetting a: a kept %v, b kept %v", okA, okB)
		}
	})
	t.Run("forgetting all drops everything", func(t *testing.T) {
		var c taskCache
		_, gen, _ := c.get("a")
		c.put("a", task("a"), gen)
		c.forget(nil, true)
		if _, _, ok := c.get("a"); ok {
			t.Fatal("kept after forgetting all")
		}
	})
	t.Run("a full cache starts over", func(t *testing.T) {
		var c taskCache
		for i := range taskCacheMax + 1 {
			id := string(rune('A'+i%26)) + time.Duration(i).String()
			_, gen, _ := c.get(id)
			c.put(id, task(id), gen)
		}
		if n := len(c.tasks); n != 1 {
			t.Fatalf("%d tasks after overflowing, want 1", n)
		}
	})
}

// Through the real writer: a task changed by a command is never served from
// the cache once the command is answered; a purge by the sweeper is not
// either; and the cache never widens who may read a task.
func TestRoomTaskServesTheLatestCommit(t *testing.T) {
	ctx := context.Background()
	clock := room.NewManualClock(time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC))
	tr := openRoom(t, func(c *Config) { c.Engine.Clock = clock.Now })
	eng := tr.Engine()
	_, owner := join(t, tr, "read", "propose")
	_, stranger := join(t, tr, "read", "propose")
	res, err := Do(ctx, tr.Room, "create", func(tx *room.Tx) (room.CreateHandoffResult, error) {
		return eng.CreateHandoff(tx, owner, room.CreateHandoffInput{Summary: "cache me"})
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.TaskID
	status := func(p room.Principal) (string, error) {
		got, err := tr.Task(ctx, p, id)
		return got.Status, err
	}

	for range 2 { // a miss, then a hit
		if s, err := status(owner); err != nil || s != room.TaskWorking {
			t.Fatalf("owner reads %q, %v; want working", s, err)
		}
	}
	if _, _, ok := tr.tasks.get(id); !ok {
		t.Fatal("the task was not cached after two reads")
	}
	if _, err := status(stranger); room.ErrorKind(err) != room.KindTaskNotFound {
		t.Fatalf("a stranger reading a cached task gets %v, want task_not_found", err)
	}
	if _, err := Do(ctx, tr.Room, "cancel", func(tx *room.Tx) (struct{}, error) {
		_, err := eng.CancelTask(tx, owner, room.TaskIDInput{TaskID: id})
		return struct{}{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if s, err := status(owner); err != nil || s != room.TaskCancelled {
		t.Fatalf("after the cancel was answered the owner reads %q, %v; want cancelled", s, err)
	}
	clock.Advance(eng.Limits.TaskTTL + time.Millisecond)
	if err := tr.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := status(owner); room.ErrorKind(err) != room.KindTaskNotFound {
		t.Fatalf("after the purge the owner gets %v, want task_not_found", err)
	}
}
