package room

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// The room's side of the proven join (joinproof.go has the wire form).

// JoinChallengeTTL is how long a server nonce may wait for the join that
// spends it, by the room's clock: a joiner sends the second step right
// after the first, so a minute covers a slow transport and leaves a
// flood little to hold.
const JoinChallengeTTL = time.Minute

// MaxJoinChallengesPerInvite bounds the outstanding challenges of one
// invitation. A new challenge beyond it pushes out that invitation's
// oldest, so a flood aimed at one invitation costs the room nothing more
// and a joiner who just asked still gets its turn.
const MaxJoinChallengesPerInvite = 16

// MaxJoinChallenges bounds the outstanding challenges of the whole room
// (a few hundred bytes each): beyond it the oldest is pushed out, so no
// number of requests grows the room's memory.
const MaxJoinChallenges = 1024

// pendingChallenge is one server nonce waiting to be spent.
type pendingChallenge struct {
	inviteID    string
	clientNonce string
	expires     int64 // Unix ms, the room's clock
	seq         uint64
}

// joinChallenges holds the outstanding server nonces, in memory only: a
// restart forgets them, and the joiner simply asks again. Every nonce is
// spent by its first use, whatever that use's outcome.
type joinChallenges struct {
	mu        sync.Mutex
	live      map[string]pendingChallenge // by server nonce
	perInvite map[string]int
	seq       uint64
}

// add records a new challenge, first dropping what has expired and then,
// at a cap, the oldest of the invitation or of the room.
func (c *joinChallenges) add(serverNonce string, p pendingChallenge, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		c.live, c.perInvite = map[string]pendingChallenge{}, map[string]int{}
	}
	if len(c.live) >= MaxJoinChallenges || c.perInvite[p.inviteID] >= MaxJoinChallengesPerInvite {
		for n, q := range c.live {
			if q.expires <= now {
				c.dropLocked(n, q)
			}
		}
	}
	for c.perInvite[p.inviteID] >= MaxJoinChallengesPerInvite {
		c.dropOldestLocked(p.inviteID)
	}
	for len(c.live) >= MaxJoinChallenges {
		c.dropOldestLocked("")
	}
	c.seq++
	p.seq = c.seq
	c.live[serverNonce] = p
	c.perInvite[p.inviteID]++
}

// dropOldestLocked drops the oldest challenge of inviteID ("" = of any).
func (c *joinChallenges) dropOldestLocked(inviteID string) {
	var oldest string
	var o pendingChallenge
	found := false
	for n, q := range c.live {
		if (inviteID == "" || q.inviteID == inviteID) && (!found || q.seq < o.seq) {
			oldest, o, found = n, q, true
		}
	}
	if found {
		c.dropLocked(oldest, o)
	}
}

func (c *joinChallenges) dropLocked(serverNonce string, p pendingChallenge) {
	delete(c.live, serverNonce)
	if c.perInvite[p.inviteID]--; c.perInvite[p.inviteID] <= 0 {
		delete(c.perInvite, p.inviteID)
	}
}

// take spends a server nonce: it is gone after this call whatever it
// answers. ok is false for a nonce that is unknown, already spent, pushed
// out, or expired at now.
func (c *joinChallenges) take(serverNonce string, now int64) (pendingChallenge, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.live[serverNonce]
	if !ok {
		return pendingChallenge{}, false
	}
	c.dropLocked(serverNonce, p)
	return p, p.expires > now
}

// count is how many challenges are held (expired ones not yet dropped
// included): what the caps bound.
func (c *joinChallenges) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

// OutstandingJoinChallenges is how many server nonces the room holds now,
// for tests and metrics: it never exceeds MaxJoinChallenges.
func (e *Engine) OutstandingJoinChallenges() int { return e.challenges.count() }

// JoinChallengeInput is the first step of the proven join: which
// invitation (its handle, not its secret) and the joiner's fresh nonce.
type JoinChallengeInput struct {
	InviteID    string `json:"invite_id"`
	ClientNonce string `json:"client_nonce"`
}

// JoinChallenge is the room's answer: a single-use server nonce and the
// proof that the answerer holds the invitation's key, which the joiner
// checks before it sends anything that could redeem the invitation.
type JoinChallenge struct {
	WorkspaceID string `json:"workspace_id"`
	InviteID    string `json:"invite_id"`
	ServerNonce string `json:"server_nonce"`
	RoomProof   string `json:"room_proof"`
	ExpiresAt   string `json:"expires_at"`
}

// maxInviteIDBytes bounds an invite_id a client sends: the room's own are
// 23 bytes; anything far longer is not one and is not looked up.
const maxInviteIDBytes = 64

// inviteKey reads k (the stored SHA-256 of the secret) of an invitation
// by its handle. Any invitation the room still has answers, whatever its
// state: proving the room spends and grants nothing, and `ce call` uses a
// spent invitation to find the room again.
func inviteKey(ctx context.Context, q Querier, inviteID string) ([]byte, error) {
	if inviteID == "" || len(inviteID) > maxInviteIDBytes {
		return nil, invalid("invite_id", "invite_id is required (the invitation's handle, never its secret)")
	}
	var k []byte
	err := q.QueryRowContext(ctx, `SELECT secret_sha256 FROM invites WHERE invite_id = ?`, inviteID).Scan(&k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(KindUnauthorized, "unknown invitation")
	}
	if err != nil {
		return nil, Internal(err)
	}
	return k, nil
}

// JoinChallenge answers the first step: it only reads (no writer, no
// event), records a single-use server nonce that expires after
// JoinChallengeTTL, and proves the room holds the invitation's key.
func (e *Engine) JoinChallenge(ctx context.Context, q Querier, in JoinChallengeInput) (JoinChallenge, error) {
	if !validJoinNonce(in.ClientNonce) {
		return JoinChallenge{}, invalid("client_nonce", "client_nonce must be %d random bytes in unpadded base64url", JoinNonceBytes)
	}
	k, err := inviteKey(ctx, q, in.InviteID)
	if err != nil {
		return JoinChallenge{}, err
	}
	now := e.Now()
	expires := ms(now.Add(JoinChallengeTTL))
	sn := NewJoinNonce()
	e.challenges.add(sn, pendingChallenge{inviteID: in.InviteID, clientNonce: in.ClientNonce, expires: expires}, ms(now))
	t := JoinTranscript{WorkspaceID: e.WorkspaceID, InviteID: in.InviteID, ClientNonce: in.ClientNonce, ServerNonce: sn}
	return JoinChallenge{WorkspaceID: e.WorkspaceID, InviteID: in.InviteID, ServerNonce: sn, RoomProof: RoomProof(k, t),
		ExpiresAt: WireTime(expires)}, nil
}

// ProvenJoinInput is the second step: the spent nonce, the joiner's proof,
// and what the joiner asks to be called (covered by the proof).
type ProvenJoinInput struct {
	InviteID    string
	ServerNonce string
	ClientProof string
	Name        string
	Kind        string
	Transport   string
	// PageKey, when set, is a one-time key to the joiner's page (issue 28)
	// that the front door made and will keep: the room only seals it into
	// the answer (SealPageKey), beside the token.
	PageKey string
}

// ProvenGrant is a session from the proven join: SessionToken is empty and
// the token travels only sealed to the join (SealSessionToken).
type ProvenGrant struct {
	SessionGrant
	SealedSessionToken string `json:"sealed_session_token"`
	// SealedPageKey is ProvenJoinInput.PageKey sealed to the join; absent
	// when none was given.
	SealedPageKey string `json:"sealed_page_key,omitempty"`
	// TokenHash is the new session token's hash (HashSecret), never sent:
	// the front door binds the page key to the session by it.
	TokenHash []byte `json:"-"`
}

// JoinProven redeems an invitation for a joiner that proved it holds the
// key in answer to a challenge the room made. The nonce is spent first,
// whatever follows; a proof that does not verify is refused before the
// invitation is looked at further, so it spends no use. Then the join is
// exactly Join's (caps, uses, re-admission), and the token is sealed.
func (e *Engine) JoinProven(tx *Tx, in ProvenJoinInput) (ProvenGrant, error) {
	if in.ServerNonce == "" || in.ClientProof == "" {
		return ProvenGrant{}, invalid("server_nonce", "server_nonce and client_proof are required (from POST /session/join/challenge)")
	}
	c, ok := e.challenges.take(in.ServerNonce, tx.nowMS())
	if !ok {
		return ProvenGrant{}, Errorf(KindUnauthorized, "unknown, spent or expired challenge: ask for a new one (POST /session/join/challenge)")
	}
	if c.inviteID != in.InviteID {
		return ProvenGrant{}, Errorf(KindUnauthorized, "the challenge was made for another invitation")
	}
	k, err := inviteKey(tx.ctx, tx.q, in.InviteID)
	if err != nil {
		return ProvenGrant{}, err
	}
	t := JoinTranscript{WorkspaceID: e.WorkspaceID, InviteID: in.InviteID, ClientNonce: c.clientNonce, ServerNonce: in.ServerNonce}
	if !ProofEqual(in.ClientProof, ClientProof(k, t, in.Name, in.Kind)) {
		return ProvenGrant{}, Errorf(KindUnauthorized, "the join proof does not verify")
	}
	g, err := e.redeem(tx, `invite_id = ?`, in.InviteID, JoinInput{Name: in.Name, Kind: in.Kind, Transport: in.Transport})
	if err != nil {
		return ProvenGrant{}, err
	}
	pg := ProvenGrant{SealedSessionToken: SealSessionToken(k, t, g.SessionRef, g.ParticipantID, g.SessionToken),
		TokenHash: HashSecret(g.SessionToken)}
	if in.PageKey != "" {
		pg.SealedPageKey = SealPageKey(k, t, g.SessionRef, g.ParticipantID, in.PageKey)
	}
	g.SessionToken = ""
	pg.SessionGrant = g
	return pg, nil
}
