// Package rpc is the MCP door's wire, both ways: the JSON-RPC envelope of
// POST /mcp decoded and validated in the spec's order (Decode, with the
// scanner that splits it, the cache of repeated params._meta and the
// readers of plain params members), and the answers encoded (WriteError,
// WriteResult, a tool's result as bytes, the pooled frames they are written
// from). It knows no method, tool or room: the door hands it its method
// table (Methods) and gets back a validated Request, so a handler reads as
// decode, run the operation, encode.
package rpc
