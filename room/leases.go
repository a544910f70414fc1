package room

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/commonroom/ce/room/markdown"
)

// Lease is an advisory reservation of a region (or the whole document) by one
// participant. Leases tell others "I am working here"; propose and commit never
// check them.
type Lease struct {
	LeaseID         string `json:"lease_id"`
	ParticipantID   string `json:"participant_id"`
	Target          string `json:"target"`           // canonical: the region's path, or "workspace"
	RequestedTarget string `json:"requested_target"` // as the caller wrote it
	AcquiredAt      string `json:"acquired_at"`
	ExpiresAt       string `json:"expires_at"`
}

// CheckoutInput asks for a lease. Minutes absent means the default (15).
type CheckoutInput struct {
	Target  string `json:"target" jsonschema:"a section title or path, or \"workspace\" for the whole document" schema:"required"`
	Minutes *int   `json:"minutes,omitempty" jsonschema:"how long (default 15, at most 120)" schema:"minimum=1"`
}

// RenewInput extends a lease the caller holds. Minutes absent means the default.
type RenewInput struct {
	LeaseID string `json:"lease_id" jsonschema:"the lease you hold" schema:"required"`
	Minutes *int   `json:"minutes,omitempty" jsonschema:"new length from now (capped at 120 minutes after acquisition)" schema:"minimum=1"`
}

// ReleaseInput ends a lease.
type ReleaseInput struct {
	LeaseID string `json:"lease_id" jsonschema:"the lease to end" schema:"required"`
}

type leaseRow struct {
	id, pid, target, requested string
	acquired, expires          int64
	released                   sql.NullInt64
}

func (l *leaseRow) view() Lease {
	return Lease{LeaseID: l.id, ParticipantID: l.pid, Target: l.target, RequestedTarget: l.requested,
		AcquiredAt: WireTime(l.acquired), ExpiresAt: WireTime(l.expires)}
}

const leaseColumns = `lease_id, participant_id, target, requested_target, acquired_at, expires_at, released_at`

func scanLease(s interface{ Scan(...any) error }) (*leaseRow, error) {
	var l leaseRow
	if err := s.Scan(&l.id, &l.pid, &l.target, &l.requested, &l.acquired, &l.expires, &l.released); err != nil {
		return nil, err
	}
	return &l, nil
}

// leaseMinutes validates a requested lease length and returns it as a duration.
// It compares in minutes so a huge value cannot overflow a Duration.
func (e *Engine) leaseMinutes(m *int) (time.Duration, error) {
	minutes := int(e.Limits.LeaseDefault / time.Minute)
	if m != nil {
		minutes = *m
	}
	if minutes <= 0 {
		return 0, invalid("minutes", "minutes must be positive")
	}
	if maxMin := int(e.Limits.LeaseMax / time.Minute); minutes > maxMin {
		// A length out of range is the caller's mistake (400), not a bound
		// the room reached: 429 would invite a retry that cannot succeed.
		return 0, invalid("minutes", "a lease lasts at most %d minutes", maxMin).With("limit", maxMin)
	}
	return time.Duration(minutes) * time.Minute, nil
}

// canonicalTarget resolves a selector against a document to the one
// spelling leases and proposals store: the region's path, or "workspace" for
// the whole document (D24).
func canonicalTarget(d *Doc, selector string) (string, error) {
	if selector == "" {
		return "", invalid("target", "target is required (a section, or %q for the whole document)", markdown.Workspace)
	}
	r, whole, err := d.FindSection(selector)
	if err != nil {
		return "", err
	}
	if whole {
		return markdown.Workspace, nil
	}
	return r.Path, nil
}

// Checkout takes a lease on a region. Selectors that name the same region
// (title, path, "section:" forms) are one lease; a region conflicts with its
// ancestors, its descendants and the whole document. Checking out again what
// the caller already holds renews it.
func (e *Engine) Checkout(tx *Tx, p Principal, in CheckoutInput) (Lease, error) {
	if err := p.Require(CapCheckout); err != nil {
		return Lease{}, err
	}
	life, err := e.leaseMinutes(in.Minutes)
	if err != nil {
		return Lease{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return Lease{}, err
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return Lease{}, err
	}
	target, err := canonicalTarget(d, in.Target)
	if err != nil {
		return Lease{}, err
	}
	// Leases past their expiry are over even if the sweeper has not run yet:
	// end them now so they neither conflict nor hold the target's unique slot.
	if err := e.releaseLeases(tx, `expires_at <= ?`, []any{tx.nowMS()}, "expired", "lease.expired"); err != nil {
		return Lease{}, err
	}
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE released_at IS NULL ORDER BY acquired_at, lease_id`)
	if err != nil {
		return Lease{}, Internal(err)
	}
	var live []*leaseRow
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			rows.Close()
			return Lease{}, Internal(err)
		}
		live = append(live, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Lease{}, Internal(err)
	}
	var mine *leaseRow
	for _, l := range live {
		if !markdown.Overlaps(l.target, target) {
			continue
		}
		if l.pid != p.ParticipantID {
			return Lease{}, Errorf(KindLeaseConflict, "%s is leased by %s until %s", l.target, l.pid, WireTime(l.expires)).
				With("lease_id", l.id).With("region", l.target)
		}
		if l.target == target {
			mine = l
		}
	}
	if mine != nil {
		return e.renewLease(tx, mine, life)
	}
	l := &leaseRow{id: newID("lease", 8), pid: p.ParticipantID, target: target, requested: in.Target,
		acquired: tx.nowMS(), expires: ms(tx.now.Add(life))}
	if _, err := tx.exec(`INSERT INTO leases(lease_id, participant_id, target, requested_target, acquired_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, l.id, l.pid, l.target, l.requested, l.acquired, l.expires); err != nil {
		return Lease{}, Internal(err)
	}
	if err := e.leaseEvent(tx, l, false); err != nil {
		return Lease{}, err
	}
	return l.view(), nil
}

func (e *Engine) leaseEvent(tx *Tx, l *leaseRow, renewed bool) error {
	return tx.emit("lease.acquired", refs{actor: l.pid}, map[string]any{
		"lease_id": l.id, "participant_id": l.pid, "target": l.target,
		"expires_at": WireTime(l.expires), "renewed": renewed,
	})
}

// renewLease moves a live lease's expiry to now+life, capped at its
// acquisition plus the maximum lease length.
func (e *Engine) renewLease(tx *Tx, l *leaseRow, life time.Duration) (Lease, error) {
	limit := l.acquired + e.Limits.LeaseMax.Milliseconds()
	if l.expires >= limit {
		return Lease{}, Errorf(KindLimitExceeded, "lease %s already runs until its maximum of %d minutes from acquisition",
			l.id, int(e.Limits.LeaseMax/time.Minute)).With("lease_id", l.id)
	}
	l.expires = min(ms(tx.now.Add(life)), limit)
	n, err := tx.execN(`UPDATE leases SET expires_at = ? WHERE lease_id = ? AND released_at IS NULL`, l.expires, l.id)
	if err != nil {
		return Lease{}, Internal(err)
	}
	if n != 1 {
		return Lease{}, Errorf(KindLeaseConflict, "lease is not active").With("lease_id", l.id)
	}
	if err := e.leaseEvent(tx, l, true); err != nil {
		return Lease{}, err
	}
	return l.view(), nil
}

func loadLease(tx *Tx, id string) (*leaseRow, error) {
	if id == "" {
		return nil, invalid("lease_id", "lease_id is required")
	}
	l, err := scanLease(tx.q.QueryRowContext(tx.ctx, `SELECT `+leaseColumns+` FROM leases WHERE lease_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(KindLeaseConflict, "lease not found").With("lease_id", id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	return l, nil
}

// Renew extends a live lease held by the caller.
func (e *Engine) Renew(tx *Tx, p Principal, in RenewInput) (Lease, error) {
	if err := p.Require(CapCheckout); err != nil {
		return Lease{}, err
	}
	life, err := e.leaseMinutes(in.Minutes)
	if err != nil {
		return Lease{}, err
	}
	l, err := loadLease(tx, in.LeaseID)
	if err != nil {
		return Lease{}, err
	}
	if l.pid != p.ParticipantID {
		return Lease{}, Errorf(KindPermissionDenied, "only the holder may renew a lease").With("lease_id", l.id)
	}
	if l.released.Valid || l.expires <= tx.nowMS() {
		return Lease{}, Errorf(KindLeaseConflict, "lease is not active").With("lease_id", l.id).With("region", l.target)
	}
	return e.renewLease(tx, l, life)
}

// Release ends a lease. The holder may release its own; an admin may release
// anyone's (recorded as such). Releasing an ended lease changes nothing.
func (e *Engine) Release(tx *Tx, p Principal, in ReleaseInput) (Ack, error) {
	return ack(e.release(tx, p, in))
}

func (e *Engine) release(tx *Tx, p Principal, in ReleaseInput) error {
	if err := p.Require(CapCheckout); err != nil {
		return err
	}
	l, err := loadLease(tx, in.LeaseID)
	if err != nil {
		return err
	}
	reason := "released"
	if l.pid != p.ParticipantID {
		if !p.IsAdmin() {
			return Errorf(KindPermissionDenied, "only the holder or an admin may release this lease").With("lease_id", l.id)
		}
		reason = "admin"
	}
	if l.released.Valid {
		return nil
	}
	if l.expires <= tx.nowMS() {
		// Already over by time; record it as the sweeper would.
		return e.releaseLeases(tx, `lease_id = ?`, []any{l.id}, "expired", "lease.expired")
	}
	return e.releaseLeases(tx, `lease_id = ?`, []any{l.id}, reason, "lease.released")
}

// LeasesResult is the answer to a leases read: an object, so an MCP tool
// result can carry it as structured content.
type LeasesResult struct {
	Leases []Lease `json:"leases"`
}

// Leases lists the live leases (not released, not past their expiry), oldest first.
func (e *Engine) Leases(ctx context.Context, q Querier, p Principal, _ Empty) (LeasesResult, error) {
	ls, err := e.leases(ctx, q, p)
	return LeasesResult{Leases: ls}, err
}

func (e *Engine) leases(ctx context.Context, q Querier, p Principal) ([]Lease, error) {
	if err := p.Require(CapRead); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE released_at IS NULL AND expires_at > ? ORDER BY acquired_at, lease_id`+limitSQL(e.Limits.MaxListItems), ms(e.Now()))
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := []Lease{}
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, Internal(err)
		}
		out = append(out, l.view())
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// releaseLeases ends the live leases matching where, with one event each.
// reason is released|expired|left|admin; eventType is lease.released or lease.expired.
func (e *Engine) releaseLeases(tx *Tx, where string, args []any, reason, eventType string) error {
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT lease_id, participant_id, target FROM leases WHERE released_at IS NULL AND `+where, args...)
	if err != nil {
		return Internal(err)
	}
	type lease struct{ id, pid, target string }
	var list []lease
	for rows.Next() {
		var l lease
		if err := rows.Scan(&l.id, &l.pid, &l.target); err != nil {
			rows.Close()
			return Internal(err)
		}
		list = append(list, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Internal(err)
	}
	for _, l := range list {
		if _, err := tx.exec(`UPDATE leases SET released_at = ?, release_reason = ? WHERE lease_id = ?`, tx.nowMS(), reason, l.id); err != nil {
			return Internal(err)
		}
		if err := tx.emit(eventType, refs{actor: l.pid}, map[string]any{
			"lease_id": l.id, "participant_id": l.pid, "target": l.target, "reason": reason,
		}); err != nil {
			return err
		}
	}
	return nil
}
