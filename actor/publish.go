package actor

import (
	"encoding/json"

	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Topics name what a listen subscriber follows. They are the only contract
// between the room's changes and the hub, which knows nothing of the room.
const (
	// EventsTopic carries every committed event (the owner page follows it).
	EventsTopic = "events"
	// EventMethod is the method of frames on EventsTopic.
	EventMethod = "notifications/commonroom/event"
)

// TaskTopic is the topic of one task's notifications/tasks frames.
func TaskTopic(taskID string) string { return "task:" + taskID }

// ResourceTopic is the topic of one resource URI's notifications/resources/updated frames.
func ResourceTopic(uri string) string { return "resource:" + uri }

// toBatch turns the outcomes of one commit into hub messages, in commit order.
func toBatch(outcomes []room.Outcome) listen.Batch {
	var b listen.Batch
	for _, o := range outcomes {
		for _, ev := range o.Events {
			p, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			b.Messages = append(b.Messages, listen.Message{Topic: EventsTopic, Method: EventMethod, Params: p})
		}
		for _, t := range o.Tasks {
			b.Messages = append(b.Messages, listen.Message{Topic: TaskTopic(t.TaskID), Method: "notifications/tasks", Params: t.Task})
		}
		for _, uri := range o.Resources {
			p, _ := json.Marshal(map[string]string{"uri": uri})
			b.Messages = append(b.Messages, listen.Message{Topic: ResourceTopic(uri), Method: "notifications/resources/updated", Params: p})
		}
		b.EndSessions = append(b.EndSessions, o.EndedSessions...)
	}
	return b
}
