// Package room is the domain of a Commonroom room: its records (participants,
// sessions, invitations, versions, leases, proposals, handoffs, tasks, events),
// the rules that move them between states, and the SQLite schema that keeps
// them. Mutating engine methods run inside one transaction owned by the room
// actor; reads run on read-only connections. Nothing here starts goroutines.
package room
