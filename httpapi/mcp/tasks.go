package mcp

import (
	"encoding/json"
	"maps"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// mcpTasks serves tasks/get, tasks/update and tasks/cancel. The capability
// gate comes before any lookup, and an unknown task and one the session may
// not see give the same -32602 "unknown task".
func (s *Handler) mcpTasks(c *mcpCall) (any, *rpcError) {
	if !c.req.Meta.Tasks {
		return nil, missingCapability(tasksCapability)
	}
	var in struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	id, responses, plain := plainMembers(c.req.members, "taskId", "inputResponses")
	if plain && responses == nil { // tasks/get and tasks/cancel: taskId alone
		in.TaskID, plain = plainString(id)
	} else {
		plain = false
	}
	if !plain {
		if e := decodeParams(c.req.Params, &in); e != nil {
			return nil, e
		}
	}
	if in.TaskID == "" {
		return nil, invalidParams("taskId is required", nil)
	}
	switch c.req.Method {
	case "tasks/get":
		// Agents poll this: the room answers from its task cache, or with
		// one statement on the read pool.
		t, memo, err := s.room.TaskMemo(c.ctx, c.p, in.TaskID)
		if err != nil {
			return nil, s.rpcErrorOf(err)
		}
		return s.taskGetResult(t, memo), nil
	case "tasks/update":
		if _, err := actor.Do(c.ctx, s.room, "task.update", func(tx *room.Tx) (room.Empty, error) {
			return s.eng.UpdateTask(tx, c.p, room.UpdateTaskInput{TaskID: in.TaskID, InputResponses: in.InputResponses})
		}); err != nil {
			return nil, s.rpcErrorOf(err)
		}
	case "tasks/cancel":
		if _, err := actor.Do(c.ctx, s.room, "task.cancel", func(tx *room.Tx) (room.Empty, error) {
			return s.eng.CancelTask(tx, c.p, room.TaskIDInput{TaskID: in.TaskID})
		}); err != nil {
			return nil, s.rpcErrorOf(err)
		}
	}
	return s.complete(nil), nil
}

// taskResult is tasks/get's answer: resultType complete plus the detailed
// task, whose _meta keeps the handoff id beside serverInfo. It is encoded
// once, straight from the struct: polling is the hottest read there is.
func (s *Handler) taskResult(t room.DetailedTask) any {
	info := s.serverInfo()
	meta := make(map[string]any, len(t.Meta)+len(info))
	maps.Copy(meta, t.Meta)
	maps.Copy(meta, info)
	t.Meta = meta
	return taskGetResult{DetailedTask: Task(t), ResultType: "complete"}
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
	res rawResult
}

// memoized is the result this handler encoded for the answer memo belongs
// to, encoding it with encode (and keeping it there) the first time. A nil
// memo encodes every time.
func (s *Handler) memoized(memo *actor.Memo, encode func() (rawResult, error)) (rawResult, error) {
	if memo != nil {
		if m, ok := memo.Load().(doorMemo); ok && m.h == s {
			return m.res, nil
		}
	}
	res, err := encode()
	if err == nil && memo != nil {
		memo.Store(doorMemo{h: s, res: res})
	}
	return res, err
}

// taskGetResult is taskResult encoded, once per cached version of the task:
// polls of a task that has not changed send the same bytes again.
func (s *Handler) taskGetResult(t room.DetailedTask, memo *actor.Memo) any {
	var res any // built only when the memo has no bytes yet
	b, err := s.memoized(memo, func() (rawResult, error) {
		res = s.taskResult(t)
		return encodeNoHTML(nil, res)
	})
	if err != nil {
		return res // writeRPCResult answers the encoding error as before
	}
	return b
}
