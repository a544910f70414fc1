package actor

import (
	"context"

	"github.com/commonroom/ce/room"
)

// ping is the runner of Ping: the writer answers it where it takes it from
// the queue, with no transaction and without counting it as a command.
type ping struct{}

func (ping) exec(*room.Tx) error { return nil }

// Ping asks the writer to answer through its command queue and waits for
// the answer, ctx or the room's stop: it is how readiness knows the writer
// is turning, at the cost of a channel round trip and no SQL. A full queue
// answers overloaded, a stopped room unavailable.
func (r *Room) Ping(ctx context.Context) error {
	select {
	case <-r.quit:
		return room.Errorf(room.KindUnavailable, "the room is stopping")
	default:
	}
	c := &call{ctx: ctx, name: "ping", run: ping{}, reply: make(chan error, 1)}
	select {
	case r.cmds <- c:
	default:
		return room.Errorf(room.KindOverloaded, "the room is busy; retry shortly")
	}
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return room.Errorf(room.KindUnavailable, "the room stopped")
	}
}

// Store is the room's sidecar, for what looks at it from outside the
// writer: readiness (is it still there) and its size on disk.
func (r *Room) Store() *room.Store { return r.store }
