package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"

	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/room"
)

// hostDoor is how the host's deciding commands (ce approve, reject, answer,
// commit) reach the room: one row of the operations table, run either
// through the serving room's owner listener with the operator credential
// (the plain HTTP route of that row) or in this process on the room opened
// under the writer lock (the row's own Run). Either way it is the same
// engine method the other doors call, as the host, and the answer is the
// JSON the route would send, so both ways print the same thing.
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
// input) and decodes its answer into out.
func (d *hostDoor) call(ctx context.Context, op string, in, out any) error {
	row, ok := opByName(op)
	if !ok {
		return room.Internal(fmt.Errorf("no operation %q", op))
	}
	if d.remote != nil {
		if row.Method() == "GET" {
			q, err := queryOf(in)
			if err != nil {
				return err
			}
			return d.remote.call(ctx, "GET", row.Path()+"?"+q.Encode(), nil, out)
		}
		return d.remote.call(ctx, row.Method(), row.Path(), in, out)
	}
	env := ops.Env{Room: d.local.room, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := row.Run(ctx, env, room.Operator(d.local.eng.HostID), func(v any) error { return roundTrip(in, v) })
	if err != nil {
		return err
	}
	res = mcp.PresentResult(res)
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
