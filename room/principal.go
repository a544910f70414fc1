package room

// Principal is who a call acts for. Identity comes from the session (or the
// local operator credential), never from request bodies.
type Principal struct {
	ParticipantID string
	SessionRef    string // non-secret handle of the session; "" for the operator
	Caps          Caps
	// Trusted marks the local operator: whoever can read the room's files
	// (in-process CLI calls, the owner credential). It passes capability
	// checks; party rules that name a participant still apply to ParticipantID.
	Trusted bool
}

// Operator is the principal of the local operator acting as the host.
func Operator(hostID string) Principal {
	return Principal{ParticipantID: hostID, Caps: Caps{CapAll}, Trusted: true}
}

// IsAdmin reports whether the principal may act on records it is not a party to.
func (p Principal) IsAdmin() bool { return p.Trusted || p.Caps.Has(CapAdmin) }
