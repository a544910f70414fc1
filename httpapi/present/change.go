package present

import (
	"encoding/json"
	"errors"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// The notification methods the room's changes are sent as. The core
// publishes domain changes (actor.toBatch); these names are MCP's, so they
// live here, in the door that speaks it.
const (
	// MethodTaskStatus carries a task as tasks/get would return it.
	MethodTaskStatus = "notifications/tasks"
	// MethodResourceUpdated names a resource whose content changed.
	MethodResourceUpdated = "notifications/resources/updated"
	// MethodListenAck is the first frame of a subscriptions/listen stream.
	MethodListenAck = "notifications/subscriptions/acknowledged"
	// MethodEvent carries one committed event on /workspace/observe, in the
	// same JSON-RPC framing so the owner page parses one kind of frame.
	MethodEvent = "notifications/commonroom/event"
)

// EncodeChange is the hub's encoder (listen.Config.Encode) for every stream
// the front door serves: subscriptions/listen, the legacy GET /mcp (this
// door's) and /workspace/observe (the plain routes', in the same framing). The hub calls it once per published change that has
// subscribers; each stream then splices in its own subscription id
// (SubscriptionTag). It reports false for a change it does not know, which
// is then not sent.
func EncodeChange(m listen.Message) (listen.Frame, bool) {
	method, params, err := notification(m.Change)
	if err != nil {
		return nil, false
	}
	f, ok := newFrame(method, params)
	return f, ok
}

// notification maps one published change to its JSON-RPC method and params.
func notification(change any) (method string, params json.RawMessage, err error) {
	switch c := change.(type) {
	case room.TaskNotice:
		params, err = json.Marshal(Task(c.Task))
		return MethodTaskStatus, params, err
	case actor.ResourceChanged:
		params, err = json.Marshal(map[string]string{"uri": c.URI})
		return MethodResourceUpdated, params, err
	case room.Event:
		params, err = json.Marshal(c)
		return MethodEvent, params, err
	}
	return "", nil, errUnknownChange
}

// errUnknownChange: a change this door has no notification for.
var errUnknownChange = errors.New("present: no notification for this change")

// SubscriptionTag is a listen stream's listen.ServeOptions.Tag: the
// _meta member naming its listen request, encoded once per stream.
func SubscriptionTag(id json.RawMessage) []byte { return appendMeta(nil, id) }
