package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/commonroom/ce/httpapi/present"
	"io"
	"log/slog"
	"net/url"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/room"
)

// hostDoor is how the CLI's writes reach the room (ce approve, reject,
// answer, commit, invite, revoke, end-session, cancel-handoffs,
// task-cancel): one row of the operations table, run either through the
// serving room's owner listener with the operator credential (the plain
// HTTP route of that row) or in this process on the room opened under the
// writer lock (the row's own Run). Either way it is the same engine method
// the other doors call, as the host (or as the participant callAs names),
// and the answer is the JSON the route would send, so both ways print the
// same thing. A command names the row; the route, the actor command and
// the engine method come from the table, so a new write is one row and
// one call here.
type hostDoor struct {
	remote *ownerClient // nil: in-process
	local  *localRoom
	doc    string // the workspace as the user named it
}

// workspace is the room's file as the user named it.
func (d *hostDoor) workspace() string { return d.doc }

// withHostDoor runs fn against the room of workspace as the host: through
// the running room when one serves, in-process (under the writer lock)
// otherwise. Never two writers (D21).
func withHostDoor(ctx context.Context, env Env, workspace string, fn func(d *hostDoor) error) error {
	oc, err := withLocalWrite(ctx, env, workspace, func(l *localRoom) error { return fn(&hostDoor{local: l, doc: workspace}) })
	if err != nil || oc == nil {
		return err
	}
	return fn(&hostDoor{remote: oc, doc: workspace})
}

// serving reports whether the door goes through a running room.
func (d *hostDoor) serving() bool { return d.remote != nil }

// call runs the operation named op with in (a struct tagged as the route's
// input) as the host and decodes its answer into out (nil: the answer is
// not wanted).
func (d *hostDoor) call(ctx context.Context, op string, in, out any) error {
	return d.callAs(ctx, "", op, in, out)
}

// callAs is call acting as participant rather than as the host ("" is the
// host): ce task-cancel, where a task id is not authorization. The running
// room is asked to act as it (the owner listener's act-as header); in this
// process it is resolved first, which under the writer lock nothing can
// change before the write runs.
func (d *hostDoor) callAs(ctx context.Context, participant, op string, in, out any) error {
	row, ok := opByName(op)
	if !ok {
		return room.Internal(fmt.Errorf("no operation %q", op))
	}
	if d.remote != nil {
		oc := *d.remote
		oc.participant = participant
		if row.Method() == "GET" {
			q, err := queryOf(in)
			if err != nil {
				return err
			}
			path := row.Path()
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return oc.call(ctx, "GET", path, nil, out)
		}
		return oc.call(ctx, row.Method(), row.Path(), in, out)
	}
	p := room.Operator(d.local.eng.HostID)
	if participant != "" {
		var err error
		p, err = actor.Read(ctx, d.local.room, func(q room.Querier) (room.Principal, error) {
			return d.local.eng.PrincipalFor(ctx, q, participant)
		})
		if err != nil {
			return err
		}
	}
	env := ops.Env{Room: d.local.room, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := row.Run(ctx, env, p, func(v any) error { return roundTrip(in, v) })
	if err != nil || out == nil {
		return err
	}
	res = present.PresentResult(res)
	if row.Bare != nil {
		res = row.Bare(res)
	}
	return roundTrip(res, out)
}

func opByName(name string) (ops.Op, bool) {
	for _, o := range ops.Table {
		if o.Name == name && o.Call.Routed() {
			return o, true
		}
	}
	return ops.Op{}, false
}

// roundTrip copies v into out through its JSON form: what the route would
// have sent and the client decoded.
func roundTrip(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return room.Internal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return room.Internal(err)
	}
	return nil
}

// queryOf turns an input struct into the query of a GET route (its JSON
// fields, strings and numbers only).
func queryOf(in any) (url.Values, error) {
	var m map[string]any
	if err := roundTrip(in, &m); err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			q.Set(k, v)
		case float64:
			q.Set(k, fmt.Sprint(int64(v)))
		}
	}
	return q, nil
}
