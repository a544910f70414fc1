// Package ops is the room's operations table: every operation the front
// doors serve, declared once with its name, HTTP route, capability, MCP tool
// (name, title, hand-written description), input type and the engine method
// it calls. The plain HTTP routes, the MCP tools/list and tools/call, and the
// operation lists of GET /protocol and /.well-known/agent-workspace are all
// built from Table, so adding an operation is one row plus its engine method.
//
// The package imports only actor and room (and jsonschema-go for the tool
// schemas) so that every door — plain HTTP in httpapi, the MCP adapter, the
// CLI — can import it without a cycle.
package ops

import (
	"context"
	"log/slog"
	"reflect"
	"strings"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// Op is one row of the operations table. The three tagged fields are what
// /protocol publishes for it.
type Op struct {
	Name       string `json:"name"`
	HTTP       string `json:"http"` // "METHOD /path"
	Capability string `json:"capability"`

	// Tool is the MCP tool name, empty when the operation is not a tool
	// (the seed's catalog, handoff_list, and the task twins handoff_cancel
	// and handoff_answer, D4 as issue 24 revised it; host moderation stays
	// off it).
	Tool        string `json:"-"`
	Title       string `json:"-"`
	Description string `json:"-"`

	// Call is how the operation runs. It is zero for the routes that are
	// not one engine call (join, the observe stream, /mcp): the router
	// wires those by hand and the table only advertises them.
	Call Call `json:"-"`

	// Bare, when set, is what plain HTTP answers in place of the result:
	// the bare list the original protocol sent, where an MCP tool result
	// has to be an object.
	Bare func(result any) any `json:"-"`

	// Audit, when set, sees every successful result, to tell the operator
	// about something the caller was not refused for.
	Audit func(log *slog.Logger, p room.Principal, result any) `json:"-"`
}

// Method is the HTTP method of the operation's route.
func (o Op) Method() string { m, _, _ := strings.Cut(o.HTTP, " "); return m }

// Path is the operation's HTTP route.
func (o Op) Path() string { _, p, _ := strings.Cut(o.HTTP, " "); return p }

// Env is what running an operation needs from the door.
type Env struct {
	Room *actor.Room
	Log  *slog.Logger
	// Records keeps the answers of CachedRead rows until the room's next
	// commit; nil reads every time.
	Records *actor.RecordCache
}

// Run decodes the input with decode (each door reads its own wire form into
// the same tagged struct) and calls the engine: a write through the actor,
// a read on the read pool.
func (o Op) Run(ctx context.Context, env Env, p room.Principal, decode func(v any) error) (any, error) {
	out, _, err := o.RunMemo(ctx, env, p, decode)
	return out, err
}

// RunMemo is Run with the memo of a kept answer (CachedRead rows; nil for
// the others), where a door may keep what it derives from that answer.
func (o Op) RunMemo(ctx context.Context, env Env, p room.Principal, decode func(v any) error) (any, *actor.Memo, error) {
	out, memo, err := o.Call.run(ctx, env, o.Name, p, decode)
	if err == nil && o.Audit != nil {
		o.Audit(env.Log, p, out)
	}
	return out, memo, err
}

// Call is the typed glue between a row and its engine method: it knows the
// input type to decode into and whether the call writes.
type Call struct {
	in    reflect.Type
	write bool
	// run returns the memo of a kept answer (CachedRead rows; nil for the
	// others) beside the answer: a memo reported through a pointer in Env
	// cost every call an allocation for the pointer.
	run func(ctx context.Context, env Env, name string, p room.Principal, decode func(v any) error) (any, *actor.Memo, error)
}

// Routed reports whether the router serves the operation from the table
// (false for the hand-wired routes).
func (c Call) Routed() bool { return c.run != nil }

// Input is the tagged struct the operation's arguments decode into.
func (c Call) Input() reflect.Type { return c.in }

// Writes reports whether the operation changes the room (it runs through
// the actor); a read runs on a snapshot and is marked read-only on MCP.
func (c Call) Writes() bool { return c.write }

// ReadFunc is an engine read method as a method expression, e.g.
// (*room.Engine).Status.
type ReadFunc[I, O any] func(e *room.Engine, ctx context.Context, q room.Querier, p room.Principal, in I) (O, error)

// WriteFunc is an engine write method as a method expression, e.g.
// (*room.Engine).Checkout.
type WriteFunc[I, O any] func(e *room.Engine, tx *room.Tx, p room.Principal, in I) (O, error)

// call is a Call that decodes the operation's input into I and hands it to
// do; every kind of row below is one of these.
func call[I any](write bool, do func(ctx context.Context, env Env, name string, p room.Principal, in I) (any, *actor.Memo, error)) Call {
	return Call{in: reflect.TypeFor[I](), write: write, run: func(ctx context.Context, env Env, name string, p room.Principal, decode func(any) error) (any, *actor.Memo, error) {
		var in I
		if err := decode(&in); err != nil {
			return nil, nil, err
		}
		return do(ctx, env, name, p, in)
	}}
}

// Read is a row's call to an engine read method.
func Read[I, O any](fn ReadFunc[I, O]) Call {
	return call(false, func(ctx context.Context, env Env, _ string, p room.Principal, in I) (any, *actor.Memo, error) {
		r := env.Room
		out, err := actor.Read(ctx, r, func(q room.Querier) (O, error) { return fn(r.Engine(), ctx, q, p, in) })
		return out, nil, err
	})
}

// CachedRead is a row's call to an engine read method that is one statement
// about records the file does not decide, and whose answer is a function
// of the sidecar alone (handoff_get): it runs on the read pool without a
// read transaction, and the door's Env.Records keeps its answer until the
// room's next commit, under key(p, in), which must name everything else the
// answer depends on.
func CachedRead[I, O any](fn ReadFunc[I, O], key func(p room.Principal, in I) string) Call {
	return call(false, func(ctx context.Context, env Env, _ string, p room.Principal, in I) (any, *actor.Memo, error) {
		r := env.Room
		out, memo, err := actor.ReadRecordCached(ctx, r, env.Records, key(p, in), func(q room.Querier) (O, error) { return fn(r.Engine(), ctx, q, p, in) })
		return out, memo, err
	})
}

// Write is a row's call to an engine write method; the actor command is
// named after the operation.
func Write[I, O any](fn WriteFunc[I, O]) Call {
	return call(true, func(ctx context.Context, env Env, name string, p room.Principal, in I) (any, *actor.Memo, error) {
		r := env.Room
		out, err := actor.Do(ctx, r, name, func(tx *room.Tx) (O, error) { return fn(r.Engine(), tx, p, in) })
		return out, nil, err
	})
}

// RoomRead is a row's read answered by the room runtime rather than the
// engine (the task cache).
func RoomRead[I, O any](fn func(ctx context.Context, r *actor.Room, p room.Principal, in I) (O, error)) Call {
	return call(false, func(ctx context.Context, env Env, _ string, p room.Principal, in I) (any, *actor.Memo, error) {
		out, err := fn(ctx, env.Room, p, in)
		return out, nil, err
	})
}

// Tools returns the rows that are MCP tools, in table order.
func Tools() []Op {
	var out []Op
	for _, o := range Table {
		if o.Tool != "" {
			out = append(out, o)
		}
	}
	return out
}
