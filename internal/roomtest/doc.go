// Package roomtest is the test kit every door's tests share: a real room (a
// Markdown file and its SQLite sidecar in t.TempDir(), the engine, the
// actor, a listen hub) served on two real listeners bound to 127.0.0.1:0,
// the parties that act in it (the operator, participants holding exactly
// the capabilities a test grants), the checks every answer must pass, the
// SSE streams they open (Stream: listen, GET /mcp, frames decoded and
// checked), and a scenario table (Scenario) for the many short cases a door
// has.
//
// It exists so that httpapi, httpapi/mcp, httpapi/page and cli tests use
// one harness instead of each restating its own. The kit imports no door:
// the caller wires the front door onto the two listeners (Options.Wire), so
// httpapi's own white-box tests can use it without an import cycle. Black-box
// tests that want ce serve's real front door use the apitest sub-package,
// which wires httpapi.New.
//
// Time is a fake clock the tests advance; the time rules are applied with
// Sweep, never by sleeping. Nothing here mocks storage.
package roomtest
