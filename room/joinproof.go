package room

// The proven join (issue 25, item 2): the wire primitives both ends use.
//
// An invitation's secret never crosses the wire in this protocol, and
// nothing derived from it does before whatever answered has proved it is
// the room. Both ends hold the same key without sending it: the room
// stores k = SHA-256(secret) (invites.secret_sha256, D22) and the joiner
// derives k from the URI. Then
//
//	joiner → POST /session/join/challenge {invite_id, client_nonce}
//	room   → {workspace_id, invite_id, server_nonce, room_proof, expires_at}
//	         room_proof = HMAC(k, "commonroom/join/v1/room", workspace_id, invite_id, client_nonce, server_nonce)
//	joiner checks room_proof in constant time; only then
//	joiner → POST /session/join {invite_id, server_nonce, client_proof, name, kind}
//	         client_proof = HMAC(k, "commonroom/join/v1/client", workspace_id, invite_id, client_nonce, server_nonce, name, kind)
//	room   → the session grant with session_token left out and
//	         sealed_session_token = base64url(gcm_nonce ‖ AES-256-GCM(seal_key, token, ad))
//	         seal_key = HMAC(k, "commonroom/join/v1/seal", workspace_id, invite_id, client_nonce, server_nonce)
//	         ad       = frame("commonroom/join/v1/token", session_ref, participant_id)
//
// Every HMAC is HMAC-SHA256 over frame(label, fields…): each of the label
// and the fields as a 4-byte big-endian length and then its bytes, so no
// two different field lists give the same input. Nonces travel as the
// unpadded base64url text of 32 random bytes, and the MAC covers that
// text; proofs travel as unpadded base64url of the 32-byte MAC.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// Labels of the proven join's MACs: each use of k has its own, so a proof
// for one step can never stand in for another.
const (
	joinLabelRoom   = "commonroom/join/v1/room"
	joinLabelClient = "commonroom/join/v1/client"
	joinLabelSeal   = "commonroom/join/v1/seal"
	joinLabelToken  = "commonroom/join/v1/token"
	// joinLabelPageKey frames the joiner's one-time page key (issue 28), so
	// it and the sealed token can never be swapped for each other.
	joinLabelPageKey = "commonroom/join/v1/page-key"
)

// JoinNonceBytes is the size of both nonces before encoding: as much as the
// key, so a nonce is never guessed or repeated.
const JoinNonceBytes = 32

// JoinKey is k, the key the room and the holder of an invitation share
// without ever sending it: SHA-256 of the secret, which is exactly what the
// room stores to look the invitation up (HashSecret).
func JoinKey(secret string) []byte { return HashSecret(secret) }

// NewJoinNonce is a fresh nonce as it travels: 32 random bytes, unpadded
// base64url.
func NewJoinNonce() string {
	b := make([]byte, JoinNonceBytes)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validJoinNonce reports whether s is a nonce of the right shape; anything
// else is refused before it costs the room a MAC or a slot.
func validJoinNonce(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == JoinNonceBytes
}

// frame is the unambiguous MAC input: every part length-prefixed.
func frame(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// joinMAC is HMAC-SHA256 under k of the framed label and fields.
func joinMAC(k []byte, label string, fields ...string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write(frame(append([]string{label}, fields...)...))
	return m.Sum(nil)
}

// JoinTranscript is what both steps of one proven join are bound to: the
// room, the invitation and both nonces. Every proof and the seal are
// computed over it, so nothing from one join (or one room) fits another.
type JoinTranscript struct {
	WorkspaceID string
	InviteID    string
	ClientNonce string
	ServerNonce string
}

func (t JoinTranscript) fields() []string {
	return []string{t.WorkspaceID, t.InviteID, t.ClientNonce, t.ServerNonce}
}

// RoomProof is what only a holder of k can answer to the challenge: the
// room's side, sent before the joiner reveals anything.
func RoomProof(k []byte, t JoinTranscript) string {
	return base64.RawURLEncoding.EncodeToString(joinMAC(k, joinLabelRoom, t.fields()...))
}

// ClientProof is the joiner's side, sent only once the room has proved
// itself; it also binds the name and kind asked for, so a relay cannot
// change them.
func ClientProof(k []byte, t JoinTranscript, name, kind string) string {
	return base64.RawURLEncoding.EncodeToString(joinMAC(k, joinLabelClient, append(t.fields(), name, kind)...))
}

// ProofEqual compares a received proof with the expected one in constant
// time (a malformed proof is simply unequal).
func ProofEqual(got, want string) bool {
	g, err := base64.RawURLEncoding.DecodeString(got)
	if err != nil {
		return false
	}
	w, err := base64.RawURLEncoding.DecodeString(want)
	if err != nil {
		return false
	}
	return hmac.Equal(g, w)
}

// sealAEAD is AES-256-GCM under the join's seal key.
func sealAEAD(k []byte, t JoinTranscript) cipher.AEAD {
	block, err := aes.NewCipher(joinMAC(k, joinLabelSeal, t.fields()...))
	if err != nil {
		panic(err) // a 32-byte key is always a valid AES-256 key
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// SealSessionToken seals a session token to one proven join: only a holder
// of k that saw both nonces can open it, so a stranger relaying both steps
// to the real room learns no usable session. The session's handles are the
// additional data: the sealed token cannot be moved onto another grant.
func SealSessionToken(k []byte, t JoinTranscript, sessionRef, participantID, token string) string {
	return sealJoin(k, t, joinLabelToken, sessionRef, participantID, token)
}

// SealPageKey seals the joiner's one-time page key (issue 28) as the token
// is sealed, so a relay learns no way into the joiner's page either.
func SealPageKey(k []byte, t JoinTranscript, sessionRef, participantID, key string) string {
	return sealJoin(k, t, joinLabelPageKey, sessionRef, participantID, key)
}

func sealJoin(k []byte, t JoinTranscript, label, sessionRef, participantID, secret string) string {
	aead := sealAEAD(k, t)
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	out := aead.Seal(nonce, nonce, []byte(secret), frame(label, sessionRef, participantID))
	return base64.RawURLEncoding.EncodeToString(out)
}

// errSealed is every failure to open a sealed token: which check failed is
// of no use to anyone.
var errSealed = errors.New("the sealed session token does not open with this invitation and join")

// OpenSessionToken opens what SealSessionToken sealed, or fails if anything
// (the token, the handles, the transcript, the key) was not what was sealed.
func OpenSessionToken(k []byte, t JoinTranscript, sessionRef, participantID, sealed string) (string, error) {
	return openJoin(k, t, joinLabelToken, sessionRef, participantID, sealed)
}

// OpenPageKey opens what SealPageKey sealed.
func OpenPageKey(k []byte, t JoinTranscript, sessionRef, participantID, sealed string) (string, error) {
	return openJoin(k, t, joinLabelPageKey, sessionRef, participantID, sealed)
}

func openJoin(k []byte, t JoinTranscript, label, sessionRef, participantID, sealed string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return "", errSealed
	}
	aead := sealAEAD(k, t)
	if len(b) < aead.NonceSize()+aead.Overhead() {
		return "", errSealed
	}
	pt, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], frame(label, sessionRef, participantID))
	if err != nil {
		return "", errSealed
	}
	return string(pt), nil
}
