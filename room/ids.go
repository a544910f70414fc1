package room

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"
)

// newID returns prefix_ + 2*n hex characters of crypto randomness. Handoffs
// and tasks use n=16 (128 bits, D25) because a task id is routable by anyone
// who learns it; other handles keep the original's 64 bits.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// newSecret returns a bearer secret: 24 random bytes (192 bits), URL-safe.
func newSecret(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashSecret is how session tokens and invitation secrets are stored and
// looked up (D22): the clear value never reaches the sidecar.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// ms converts a time to the stored form (Unix milliseconds, UTC).
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts a stored time back.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// WireTime is the one time format on the wire: RFC 3339 UTC with milliseconds.
func WireTime(v int64) string { return fromMS(v).Format("2006-01-02T15:04:05.000Z07:00") }

// wireTimePtr formats an optional stored time.
func wireTimePtr(v *int64) *string {
	if v == nil {
		return nil
	}
	s := WireTime(*v)
	return &s
}
