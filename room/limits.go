package room

import "time"

// Limits are the room's numeric rules. They are values, not constants, so
// tests and benchmarks can tighten them; Defaults are the product's numbers
// (ARCHITECTURE.md D38).
type Limits struct {
	MaxBodyBytes        int64
	MaxChangeBytes      int
	MaxLiveSessions     int
	EventRing           int
	LeaseDefault        time.Duration
	LeaseMax            time.Duration
	InviteDefault       time.Duration
	InviteMax           time.Duration
	SessionDefault      time.Duration
	SessionMax          time.Duration
	MaxListItems        int
	MaxInvitePayload    int
	MaxNameChars        int
	MaxTransportChars   int
	MaxActiveTasks      int
	TaskTTL             time.Duration
	TaskPollInterval    time.Duration
	MaxSummaryChars     int
	MaxConstraintsChars int
	MaxResultBytes      int
	MaxIdempotencyChars int
	MaxOpenInputs       int
	MaxInputMessage     int
	MaxArtifacts        int
	MaxArtifactURIChars int
	RateLimitPerMinute  int

	// MaxTasksPerParticipant is one participant's share of MaxActiveTasks:
	// the active tasks of the handoffs it created. Without it one session
	// could fill the room's cap and lock everyone out for a task TTL (issue
	// 13 item 10). The host is exempt. Valid values are 1..MaxActiveTasks.
	MaxTasksPerParticipant int
	// MaxSessionsPerInvite caps the live sessions that one invitation's
	// joiners hold at once, so a many-use invitation cannot take every
	// session of the room; an invitation may set a lower cap of its own.
	MaxSessionsPerInvite int
	// MaxResourceURIChars bounds a resource URI a client asks to follow
	// (resources/subscribe): a longer one is refused before it is parsed,
	// looked up or stored, and never echoed back.
	MaxResourceURIChars int
	// MaxSubscriptionsPerSession caps the legacy resources/subscribe
	// registry of one session, which lives in memory until the session ends.
	MaxSubscriptionsPerSession int
	// MaxPendingProposalsPerParticipant caps the proposals one participant
	// may have waiting for review, so one agent cannot fill the sidecar or
	// the host's review queue.
	MaxPendingProposalsPerParticipant int
	// MaxPendingProposals caps the pending proposals of the whole room.
	MaxPendingProposals int
	// SessionMaxLifetime is the hard end of a session, counted from when it
	// was issued. Each authenticated use slides a session's expiry by its
	// idle window (the length it was issued for: SessionDefault unless the
	// joiner asked, at most SessionMax), never past this (issue 16 item 4).
	SessionMaxLifetime time.Duration
	// MaxStoredBytesPerDay bounds what one participant's actions make the
	// room store in one UTC day: handoff text, results, input requests and
	// answers, proposals and artifacts, each record counted with
	// StoredRecordOverhead (storage_share.go). Without it one session with
	// the default capabilities could make the room keep tens of GB a day
	// (issue 26). The host is exempt; 0 or less means no bound.
	MaxStoredBytesPerDay int64
}

// Defaults returns the product's limits.
func Defaults() Limits {
	return Limits{
		MaxBodyBytes:        1 << 20,
		MaxChangeBytes:      256 << 10,
		MaxLiveSessions:     32,
		EventRing:           2000,
		LeaseDefault:        15 * time.Minute,
		LeaseMax:            120 * time.Minute,
		InviteDefault:       60 * time.Minute,
		InviteMax:           7 * 24 * time.Hour,
		SessionDefault:      8 * time.Hour,
		SessionMax:          24 * time.Hour,
		MaxListItems:        200,
		MaxInvitePayload:    8192,
		MaxNameChars:        80,
		MaxTransportChars:   64,
		MaxActiveTasks:      32,
		TaskTTL:             24 * time.Hour,
		TaskPollInterval:    5 * time.Second,
		MaxSummaryChars:     2000,
		MaxConstraintsChars: 8000,
		MaxResultBytes:      256 << 10,
		MaxIdempotencyChars: 128,
		MaxOpenInputs:       16,
		MaxInputMessage:     2000,
		MaxArtifacts:        32,
		MaxArtifactURIChars: 2048,
		RateLimitPerMinute:  600,

		// A quarter of the room: four busy participants can fill it, no
		// single one can.
		MaxTasksPerParticipant: 8,
		MaxSessionsPerInvite:   8,
		// A section URI is the document's plus a percent-encoded heading
		// path: 4 KiB leaves room for deep, long headings.
		MaxResourceURIChars:               4096,
		MaxSubscriptionsPerSession:        64,
		MaxPendingProposalsPerParticipant: 8,
		MaxPendingProposals:               64,
		// A working week: an agent used every day keeps its session; one
		// idle for a working day (SessionDefault) loses it.
		SessionMaxLifetime: 7 * 24 * time.Hour,
		// 16 MiB a day: about 16,000 small handoffs, or 60 results of the
		// largest size, a day from one participant, and one participant's
		// flood far under 64 MB a day (bench/RESULTS.md, Issue 26).
		MaxStoredBytesPerDay: 16 << 20,
	}
}
