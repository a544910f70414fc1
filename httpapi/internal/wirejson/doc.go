// Package wirejson holds what both front doors of a room — the plain HTTP
// routes (package httpapi) and the MCP JSON-RPC adapter (httpapi/mcp) —
// put on and take off the wire the same way: the Commonroom error object
// with its bounded strings, the decoding of one JSON object of arguments,
// and a writer that holds the status back until the first byte. It is its
// own package so that neither door imports the other for these, and so
// that a bound or a decoding rule cannot differ between them. It decides
// nothing about statuses or JSON-RPC codes: each door maps errors its own
// way.
package wirejson
