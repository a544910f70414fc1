package mcp

import (
	"encoding/json"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"github.com/commonroom/ce/httpapi/present"
	"maps"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// tasks serves tasks/get, tasks/update and tasks/cancel. The capability
// gate comes before any lookup, and an unknown task and one the session may
// not see give the same -32602 "unknown task".
func (h *Handler) tasks(c *call) (any, *rpc.Error) {
	if !c.req.Meta.Tasks {
		return nil, rpc.MissingCapability(tasksCapability)
	}
	in, e := decodeTaskParams(c)
	if e != nil {
		return nil, e
	}
	switch c.req.Method {
	case "tasks/get":
		// Agents poll this: the room answers from its task cache, or with
		// one statement on the read pool.
		t, memo, err := h.room.TaskMemo(c.ctx, c.p, in.TaskID)
		if err != nil {
			return nil, h.rpcErrorOf(err)
		}
		return h.taskGetResult(t, memo), nil
	case "tasks/update":
		if _, err := actor.Do(c.ctx, h.room, "task.update", func(tx *room.Tx) (room.Empty, error) {
			return h.eng.UpdateTask(tx, c.p, room.UpdateTaskInput{TaskID: in.TaskID, InputResponses: in.InputResponses})
		}); err != nil {
			return nil, h.rpcErrorOf(err)
		}
	case "tasks/cancel":
		if _, err := actor.Do(c.ctx, h.room, "task.cancel", func(tx *room.Tx) (room.Empty, error) {
			return h.eng.CancelTask(tx, c.p, room.TaskIDInput{TaskID: in.TaskID})
		}); err != nil {
			return nil, h.rpcErrorOf(err)
		}
	}
	return h.complete(nil), nil
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// decodeTaskParams reads a Tasks method's params: taskId alone (tasks/get
// and tasks/cancel) from the members the envelope split, where that gives
// what json.Unmarshal gives, anything else by json.Unmarshal. taskId is
// required.
func decodeTaskParams(c *call) (taskParams, *rpc.Error) {
	var in taskParams
	id, responses, plain := c.req.Plain("taskId", "inputResponses")
	if plain && responses == nil {
		in.TaskID, plain = rpc.PlainString(id)
	} else {
		plain = false
	}
	if !plain {
		if e := rpc.DecodeParams(c.req.Params, &in); e != nil {
			return taskParams{}, e
		}
	}
	if in.TaskID == "" {
		return taskParams{}, rpc.InvalidParams("taskId is required", nil)
	}
	return in, nil
}

// taskResult is tasks/get's answer: resultType complete plus the detailed
// task, whose _meta keeps the handoff id beside serverInfo. It is encoded
// once, straight from the struct: polling is the hottest read there is.
func (h *Handler) taskResult(t room.DetailedTask) any {
	info := h.serverInfo()
	meta := make(map[string]any, len(t.Meta)+len(info))
	maps.Copy(meta, t.Meta)
	maps.Copy(meta, info)
	t.Meta = meta
	return taskGetResult{DetailedTask: present.Task(t), ResultType: "complete"}
}

// taskGetResult is the detailed task with the result's resultType.
type taskGetResult struct {
	room.DetailedTask
	ResultType string `json:"resultType"`
}

// doorMemo is the MCP door's memo on a cached answer (a task version, a
// kept handoff_get answer): its result, encoded by this handler (whose
// version is in serverInfo). Every memo the door stores is this type.
type doorMemo struct {
	h   *Handler
	res rpc.Raw
}

// memoized is the result this handler encoded for the answer memo belongs
// to, encoding it with encode (and keeping it there) the first time. A nil
// memo encodes every time.
func (h *Handler) memoized(memo *actor.Memo, encode func() (rpc.Raw, error)) (rpc.Raw, error) {
	if memo != nil {
		if m, ok := memo.Load().(doorMemo); ok && m.h == h {
			return m.res, nil
		}
	}
	res, err := encode()
	if err == nil && memo != nil {
		memo.Store(doorMemo{h: h, res: res})
	}
	return res, err
}

// taskGetResult is taskResult encoded, once per cached version of the task:
// polls of a task that has not changed send the same bytes again.
func (h *Handler) taskGetResult(t room.DetailedTask, memo *actor.Memo) any {
	var res any // built only when the memo has no bytes yet
	b, err := h.memoized(memo, func() (rpc.Raw, error) {
		res = h.taskResult(t)
		return rpc.EncodeNoHTML(nil, res)
	})
	if err != nil {
		return res // rpc.WriteResult answers the encoding error as before
	}
	return b
}
