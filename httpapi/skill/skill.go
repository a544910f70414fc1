// Package skill is the agent guide, SKILL.md: how to work in a Commonroom
// room, for an agent that may only call tools. Both doors serve the same
// bytes: plain HTTP at GET /skills/commonroom, MCP as the resource URI (the
// skills-as-resources convention hosts use to find a server's skill). It is
// a package of its own so that both can embed it without importing each
// other.
package skill

import _ "embed"

//go:embed SKILL.md
var text string

// URI names the guide as an MCP resource.
const URI = "skill://commonroom/SKILL.md"

// Text is SKILL.md as it was built into the binary.
func Text() string { return text }
