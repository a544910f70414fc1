package actor

import (
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Topics name what a listen subscriber follows. They are the only contract
// between the room's changes and the hub, which knows nothing of the room.
// Each topic carries one kind of change: the front door that serves the
// streams decides how each is spelled on the wire (listen.Config.Encode).
const (
	// EventsTopic carries every committed event, as a room.Event (the
	// owner page follows it).
	EventsTopic = "events"
)

// TaskTopic is the topic of one task's changes, each a room.TaskNotice
// holding the task as it stood when the commit finished.
func TaskTopic(taskID string) string { return "task:" + taskID }

// ResourceTopic is the topic of one resource URI's changes, each a
// ResourceChanged.
func ResourceTopic(uri string) string { return "resource:" + uri }

// ResourceChanged is published when a commit changed the content of a
// resource (the document, or a section of it), named by its URI.
type ResourceChanged struct {
	URI string
}

// toBatch turns the outcomes of one commit into hub messages, in commit
// order. It only routes: encoding is left to the hub's encoder, which runs
// once per message and only for messages someone follows, off the writer.
func toBatch(outcomes []room.Outcome) listen.Batch {
	var b listen.Batch
	for _, o := range outcomes {
		for _, ev := range o.Events {
			b.Messages = append(b.Messages, listen.Message{Topic: EventsTopic, Change: ev})
		}
		for _, t := range o.Tasks {
			b.Messages = append(b.Messages, listen.Message{Topic: TaskTopic(t.TaskID), Change: t})
		}
		for _, uri := range o.Resources {
			b.Messages = append(b.Messages, listen.Message{Topic: ResourceTopic(uri), Change: ResourceChanged{URI: uri}})
		}
		b.EndSessions = append(b.EndSessions, o.EndedSessions...)
	}
	return b
}
