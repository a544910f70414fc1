package present

// ProtocolVersion is the one MCP version the MCP door serves; discovery
// documents (/.well-known/agent-workspace, /protocol) name it too.
const ProtocolVersion = "2026-07-28"

// TasksExtension is the Tasks extension's key, in client capabilities and
// in what discovery documents advertise.
const TasksExtension = "io.modelcontextprotocol/tasks"

// SubscriptionIDKey is the _meta key that ties a stream's frames to its
// subscriptions/listen request.
const SubscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

// Instructions is what server/discover tells a model about the room: the
// workflow in one paragraph, with tools alone, and where the whole guide
// is. It is exported so that ce mcp can give a host of an older protocol,
// which starts with initialize, the same words.
const Instructions = "A Commonroom room: one Markdown file shared by people and agents. The whole guide is the resource skill://commonroom/SKILL.md " +
	"(and the prompts commonroom_edit_workflow and commonroom_handoff_workflow). Read the document with workspace_status, workspace_summary and workspace_read; " +
	"the file changes only through workspace_propose, which a human approves before workspace_commit. " +
	"Hand work to someone with handoff_create; the worker uses handoff_accept, handoff_request_input and handoff_complete; " +
	"the requester answers questions with handoff_answer, cancels with handoff_cancel, and polls handoff_get every poll_interval_ms; " +
	"someone with approve decides with handoff_approve or handoff_reject. " +
	"Clients with the Tasks extension may use tasks/get, subscriptions/listen, tasks/update and tasks/cancel instead."
