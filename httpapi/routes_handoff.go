package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/commonroom/ce/room"
)

// The HTTP twins of the handoff tools and the Tasks methods (spec/domain.md
// §6.3). They decode into the same argument types and call the same engine
// methods as /mcp.

func (s *Server) postHandoff(w http.ResponseWriter, r *http.Request) {
	var in room.CreateHandoffInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	res, err := s.createHandoff(r.Context(), principalOf(r), in)
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	if res.Task != nil { // a replay may find its task failed
		t := MCPTask(*res.Task)
		res.Task = &t
	}
	sendJSON(w, http.StatusOK, res)
}

func (s *Server) getHandoff(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("handoff_id")
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.Handoff, error) {
		return s.eng.GetHandoff(ctx, q, p, id)
	})
}

func (s *Server) getHandoffEvents(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("handoff_id")
	since, err := queryInt64(r, "since_event_id")
	var limit int
	if err == nil {
		limit, _, err = queryInt(r, "limit")
	}
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	read(s, w, r, func(ctx context.Context, q room.Querier, p room.Principal) (room.HandoffEventsResult, error) {
		return s.eng.HandoffEvents(ctx, q, p, id, since, limit)
	})
}

// postHandoffAction serves the POST /workspace/handoff/<action> routes.
func postHandoffAction[I any](s *Server, name string, fn func(tx *room.Tx, p room.Principal, in I) (room.Handoff, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in I
		if err := s.decodeJSON(w, r, &in); err != nil {
			s.sendError(w, r, err)
			return
		}
		write(s, w, r, name, func(tx *room.Tx, p room.Principal) (room.Handoff, error) { return fn(tx, p, in) })
	}
}

// getTask is tasks/get over plain HTTP, answered the same way (the task cache).
func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	t, err := s.room.Task(r.Context(), principalOf(r), r.URL.Query().Get("task_id"))
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	sendJSON(w, http.StatusOK, MCPTask(t))
}

type taskUpdateBody struct {
	TaskID         string                     `json:"task_id"`
	InputResponses map[string]json.RawMessage `json:"input_responses"`
}

func (s *Server) postTaskUpdate(w http.ResponseWriter, r *http.Request) {
	var in taskUpdateBody
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "task.update", func(tx *room.Tx, p room.Principal) (struct{}, error) {
		return struct{}{}, s.eng.UpdateTask(tx, p, in.TaskID, in.InputResponses)
	})
}

func (s *Server) postTaskCancel(w http.ResponseWriter, r *http.Request) {
	var in struct {
		TaskID string `json:"task_id"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "task.cancel", func(tx *room.Tx, p room.Principal) (struct{}, error) {
		return struct{}{}, s.eng.CancelTask(tx, p, in.TaskID)
	})
}
