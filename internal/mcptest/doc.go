// Package mcptest is the one client the programs that talk to a real room
// share: the httpapi tests, the crash test and the bench. It speaks MCP
// 2026-07-28 on POST /mcp the way a conforming client does (bearer session,
// the routing headers, params._meta), reads SSE streams frame by frame, and
// joins a room through an invitation.
//
// Its core returns errors, so the bench (which is not a test) can use it on
// its hot paths without a testing.TB; the Must* helpers and the bounded
// waits that take a testing.TB are thin wrappers over that core, failing the
// test with what was seen. Nothing here is a mock: every call is a real
// request on a real connection.
package mcptest
