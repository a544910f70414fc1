// Package present is how every door shows the room: a task in its one form
// (D14, Task), an operation's answer (PresentResult), a published change as
// the JSON-RPC notification frame every stream carries (EncodeChange: MCP's
// subscriptions/listen and GET /mcp, the plain door's /workspace/observe and
// the owner page), and the protocol facts discovery advertises
// (ProtocolVersion, TasksExtension, Instructions).
//
// It is a package of its own so that the plain door (httpapi), the CLI and
// the MCP door present the same things the same way without importing one
// another: a door imports present, never another door. It imports only the
// core (room, actor, listen).
package present
