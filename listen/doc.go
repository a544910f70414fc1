// Package listen fans committed room changes out to live subscribers. It knows
// nothing of SQL or of the room's records: it moves pre-encoded messages from
// one publisher to many bounded per-subscriber queues and writes them as
// server-sent events, dropping any subscriber that cannot keep up.
package listen
