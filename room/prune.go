package room

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Retention's pruning (issue 26, item 2). The actor runs it between other
// commands in short transactions of its own (PruneStep, PruneParticipant),
// each removing at most a budget of records, and comes back while work is
// left: the writer is never held for more than one small batch. Pruning
// writes no event (it is retention, not a state change, like the task
// purge); it leaves a tombstone for handoffs and proposals (pruned_ids),
// and versions need none (see migration 12), so a read of a pruned record
// says "pruned". With an archive, every record is appended to it before
// the delete commits.

// PruneCounts counts what retention removed, by kind. The engine keeps a
// running total since start (PruneTotals) for ce status, /debug/metrics
// and the owner page.
type PruneCounts struct {
	Handoffs     int64 `json:"handoffs"`
	Tasks        int64 `json:"tasks"`  // task rows still present with their handoff
	Inputs       int64 `json:"inputs"` // input requests deleted with their task
	Events       int64 `json:"events"` // events deleted with their handoff
	Proposals    int64 `json:"proposals"`
	Versions     int64 `json:"versions"`
	Chunks       int64 `json:"chunks"` // version chunks no version uses any more
	Sessions     int64 `json:"sessions"`
	Leases       int64 `json:"leases"`
	Invitations  int64 `json:"invitations"`
	Participants int64 `json:"participants"`
	Tombstones   int64 `json:"tombstones"` // tombstones dropped after their window
}

// Records is how many records (not counting chunks, tombstones and rows
// deleted with their handoff) the counts hold.
func (c PruneCounts) Records() int64 {
	return c.Handoffs + c.Proposals + c.Versions + c.Sessions + c.Leases + c.Invitations + c.Participants
}

// byKind is c by its JSON names, leaving out the kinds it has none of
// (Storage.Pruned): the names come from the struct's tags, so a kind added
// to PruneCounts shows without a second list to keep.
func (c PruneCounts) byKind() map[string]int64 {
	b, _ := json.Marshal(c) // a struct of int64s: cannot fail
	var all map[string]int64
	json.Unmarshal(b, &all)
	for k, v := range all {
		if v == 0 {
			delete(all, k)
		}
	}
	return all
}

// Add adds o to c.
func (c *PruneCounts) Add(o PruneCounts) {
	c.Handoffs += o.Handoffs
	c.Tasks += o.Tasks
	c.Inputs += o.Inputs
	c.Events += o.Events
	c.Proposals += o.Proposals
	c.Versions += o.Versions
	c.Chunks += o.Chunks
	c.Sessions += o.Sessions
	c.Leases += o.Leases
	c.Invitations += o.Invitations
	c.Participants += o.Participants
	c.Tombstones += o.Tombstones
}

// pruneState is the engine's memory of pruning: the totals since start,
// and where each scan may resume.
type pruneState struct {
	mu     sync.Mutex
	totals PruneCounts
	// versionsFrom is the lowest version not yet examined by thinning: the
	// versions below it were pruned or are kept for good (a day's last).
	// In memory: after a restart thinning looks once more from version 1.
	versionsFrom int64
	// keptParticipants are left participants that something still names;
	// they are tried again after a restart.
	keptParticipants map[string]bool
}

// PruneTotals returns what retention removed since the engine started.
func (e *Engine) PruneTotals() PruneCounts {
	e.prune.mu.Lock()
	defer e.prune.mu.Unlock()
	return e.prune.totals
}

// DefaultPruneBudget is how many records one prune transaction removes at
// most. On the bench machine under load a turn of 16 held the writer 3.2 ms
// on average (most of it the commit's fsync), one of 64 7.2 ms
// (bench/RESULTS.md, Issue 26); 16 still prunes ~5,000 records a second,
// far above any room's rate.
const DefaultPruneBudget = 16

// terminalHandoffStatuses and decidedProposalStatuses are what retention
// may prune; 'approved' proposals still wait for their commit.
var (
	terminalHandoffStatuses = []string{HandoffApproved, HandoffRejected, HandoffCancelled}
	decidedProposalStatuses = []string{"rejected", "committed", "conflicted", "superseded"}
)

// PruneStep removes, in the caller's transaction, at most budget records
// whose window has passed: terminal handoffs, decided proposals, thinned
// versions, ended sessions and released leases, spent invitations, then
// tombstones past their window. more says work is left (the actor comes
// back at once). It must run with foreign keys off (the actor's prune
// turn): deleting a handoff would otherwise make SQLite walk the tasks
// table for children (its correlation_id has no index since migration
// 10). Every rule here keeps the references whole by itself: a handoff
// goes with its task and inputs and only when no handoff follows it; a
// version only when no proposal or live handoff is based on it.
func (e *Engine) PruneStep(tx *Tx, budget int) (PruneCounts, bool, error) {
	var c PruneCounts
	r := e.Retention
	if !r.Enabled() || budget <= 0 {
		return c, false, nil
	}
	now := tx.nowMS()
	left := budget
	var recs []ArchiveRecord
	type step struct {
		window time.Duration
		run    func(cutoff int64, n int) (int, []ArchiveRecord, error)
	}
	steps := []step{
		{r.Handoffs, func(cut int64, n int) (int, []ArchiveRecord, error) { return e.pruneHandoffs(tx, cut, n, &c) }},
		{r.Proposals, func(cut int64, n int) (int, []ArchiveRecord, error) { return e.pruneProposals(tx, cut, n, &c) }},
		{r.Versions, func(cut int64, n int) (int, []ArchiveRecord, error) { return e.thinVersions(tx, cut, n, &c) }},
		{r.Sessions, func(cut int64, n int) (int, []ArchiveRecord, error) { return e.pruneSessions(tx, cut, n, &c) }},
		{r.Invitations, func(cut int64, n int) (int, []ArchiveRecord, error) { return e.pruneInvites(tx, cut, n, &c) }},
	}
	for _, s := range steps {
		if s.window <= 0 || left <= 0 {
			continue
		}
		n, got, err := s.run(now-s.window.Milliseconds(), left)
		if err != nil {
			return PruneCounts{}, false, err
		}
		left -= n
		recs = append(recs, got...)
	}
	if left > 0 {
		n, err := e.dropTombstones(tx, now, left)
		if err != nil {
			return PruneCounts{}, false, err
		}
		c.Tombstones += int64(n)
		left -= n
	}
	// The archive is written (and synced) before the deletes commit; a
	// failure rolls the whole step back.
	if err := e.archive(recs); err != nil {
		return PruneCounts{}, false, Internal(err)
	}
	if c.Tasks > 0 {
		tx.tasksPurged = true
	}
	tx.after = append(tx.after, func() {
		e.prune.mu.Lock()
		e.prune.totals.Add(c)
		e.prune.mu.Unlock()
	})
	return c, left <= 0, nil
}

func (e *Engine) archive(recs []ArchiveRecord) error {
	if e.Archive == nil || len(recs) == 0 {
		return nil
	}
	return e.Archive.Append(recs)
}

// record builds an archive line for a row (nil when there is no archive,
// so pruning without one reads no more than it deletes).
func (e *Engine) record(tx *Tx, kind, id string, row map[string]any) ArchiveRecord {
	return ArchiveRecord{Kind: kind, ID: id, WorkspaceID: e.WorkspaceID, PrunedAt: WireTime(tx.nowMS()), Record: row}
}

// archiveRow adds the archive line of the row query selects (by id), when
// there is an archive.
func (e *Engine) archiveRow(tx *Tx, recs *[]ArchiveRecord, kind, id, query string) error {
	if e.Archive == nil {
		return nil
	}
	rows, err := rowMaps(tx.ctx, tx.q, query, id)
	if err != nil {
		return Internal(err)
	}
	for _, r := range rows {
		*recs = append(*recs, e.record(tx, kind, id, r))
	}
	return nil
}

// pruneSelected archives and deletes the rows of table whose keys query
// selects, records of kind, adding how many to *count; with tombstone a
// read of one says "pruned" rather than "not found". It returns how many it
// removed and their archive records.
func (e *Engine) pruneSelected(tx *Tx, kind, table, key string, tombstone bool, count *int64, query string, args ...any) (int, []ArchiveRecord, error) {
	ids, err := queryStrings(tx.ctx, tx.q, query, args...)
	if err != nil {
		return 0, nil, err
	}
	var recs []ArchiveRecord
	for _, id := range ids {
		if err := e.archiveRow(tx, &recs, kind, id, `SELECT * FROM `+table+` WHERE `+key+` = ?`); err != nil {
			return 0, nil, err
		}
		if _, err := tx.exec(`DELETE FROM `+table+` WHERE `+key+` = ?`, id); err != nil {
			return 0, nil, Internal(err)
		}
		if tombstone {
			if err := tx.tombstone(kind, id); err != nil {
				return 0, nil, err
			}
		}
		*count++
	}
	return len(ids), recs, nil
}

// idKey is a random id's tombstone key: the first 64 bits of its hex part.
func idKey(id string) (int64, bool) {
	i := strings.LastIndexByte(id, '_')
	h := id[i+1:]
	if len(h) < 16 {
		return 0, false
	}
	b, err := hex.DecodeString(h[:16])
	if err != nil {
		return 0, false
	}
	var v int64
	for _, x := range b {
		v = v<<8 | int64(x)
	}
	return v, true
}

func (tx *Tx) tombstone(kind, id string) error {
	key, ok := idKey(id)
	if !ok {
		return nil
	}
	_, err := tx.exec(`INSERT OR REPLACE INTO pruned_ids(id_key, kind, pruned_at) VALUES (?, ?, ?)`, key, kind, tx.nowMS())
	if err != nil {
		return Internal(err)
	}
	return nil
}

// PrunedAt reports whether id names a record of kind (handoff, proposal)
// that retention pruned, and when. It reads only the tombstone, so callers
// ask it after the record itself was not found.
func PrunedAt(ctx context.Context, q Querier, kind, id string) (string, bool) {
	key, ok := idKey(id)
	if !ok {
		return "", false
	}
	var at int64
	if err := q.QueryRowContext(ctx, `SELECT pruned_at FROM pruned_ids WHERE id_key = ? AND kind = ?`, key, kind).Scan(&at); err != nil {
		return "", false
	}
	return WireTime(at), true
}

// prunedError turns a not-found answer for a pruned record into a clear
// "pruned" one: the same kind (clients that branch on it keep working)
// with pruned: true, pruned_at, and a message that says so.
func prunedError(err *Error, what, id, at string) *Error {
	return &Error{Kind: err.Kind, Message: what + " " + id + " was pruned by the room's retention policy on " + at,
		Fields: map[string]any{"pruned": true, "pruned_at": at}}
}

// dropTombstones deletes tombstones older than their kind's window.
func (e *Engine) dropTombstones(tx *Tx, now int64, n int) (int, error) {
	total := 0
	for _, k := range []struct {
		kind string
		w    time.Duration
	}{{"handoff", e.Retention.Handoffs}, {"proposal", e.Retention.Proposals}} {
		if k.w <= 0 || n-total <= 0 {
			continue
		}
		d, err := tx.execN(`DELETE FROM pruned_ids WHERE id_key IN (SELECT id_key FROM pruned_ids
			WHERE pruned_at <= ? AND kind = ? ORDER BY pruned_at LIMIT ?)`, now-k.w.Milliseconds(), k.kind, n-total)
		if err != nil {
			return total, Internal(err)
		}
		total += int(d)
	}
	return total, nil
}

// rowMaps reads a query's rows as column → value maps for the archive:
// blobs as hex, secrets' hashes left out.
func rowMaps(ctx context.Context, q Querier, query string, args ...any) ([]map[string]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			switch c {
			case "token_sha256", "secret_sha256", "chunk_ids":
				continue
			}
			switch v := vals[i].(type) {
			case []byte:
				if utf8.Valid(v) && !strings.HasSuffix(c, "sha256") {
					m[c] = string(v)
				} else {
					m[c] = hex.EncodeToString(v)
				}
			default:
				m[c] = v
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// pruneHandoffs deletes up to n terminal handoffs settled before cutoff,
// with their tasks, input requests and events, oldest first, one status
// at a time (each read in created_at order from handoffs_by_status_recent,
// so a backlog of a million costs a page per batch, not a sort). A handoff
// another handoff follows is kept until its follower is gone; the DELETE
// checks again, in the writer's transaction, that the handoff is still
// terminal and unfollowed: a create that follows it, committed before
// the prune's transaction, keeps it.
func (e *Engine) pruneHandoffs(tx *Tx, cutoff int64, n int, c *PruneCounts) (int, []ArchiveRecord, error) {
	var recs []ArchiveRecord
	done := 0
	// A follower deleted frees the handoff it followed: look again (within
	// the budget) so a chain goes in one pass.
	for again := true; again && done < n; {
		again = false
		for _, status := range terminalHandoffStatuses {
			if done >= n {
				break
			}
			rows, err := tx.q.QueryContext(tx.ctx, `SELECT handoff_id, task_id, follows_handoff_id IS NOT NULL FROM handoffs
			WHERE status = ? AND created_at <= ? AND updated_at <= ?
			AND NOT EXISTS (SELECT 1 FROM handoffs f WHERE f.follows_handoff_id = handoffs.handoff_id)
			ORDER BY created_at LIMIT ?`, status, cutoff, cutoff, n-done)
			if err != nil {
				return 0, nil, Internal(err)
			}
			type cand struct {
				id, task string
				follows  bool
			}
			var list []cand
			for rows.Next() {
				var x cand
				if err := rows.Scan(&x.id, &x.task, &x.follows); err != nil {
					rows.Close()
					return 0, nil, Internal(err)
				}
				list = append(list, x)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return 0, nil, Internal(err)
			}
			for _, x := range list {
				if e.Archive != nil {
					rec, err := e.handoffRecord(tx, x.id, x.task)
					if err != nil {
						return 0, nil, Internal(err)
					}
					recs = append(recs, rec)
				}
				// Children first, so the delete is also right with foreign keys
				// on; the candidate was chosen in this same transaction.
				inputs, err := tx.execN(`DELETE FROM task_inputs WHERE task_id = ?`, x.task)
				if err != nil {
					return 0, nil, Internal(err)
				}
				tasks, err := tx.execN(`DELETE FROM tasks WHERE task_id = ?`, x.task)
				if err != nil {
					return 0, nil, Internal(err)
				}
				events, err := tx.execN(`DELETE FROM events WHERE substr(handoff_id, -8) = substr(?, -8) AND handoff_id = ?`, x.id, x.id)
				if err != nil {
					return 0, nil, Internal(err)
				}
				if _, err := tx.exec(`DELETE FROM handoffs WHERE handoff_id = ?`, x.id); err != nil {
					return 0, nil, Internal(err)
				}
				if err := tx.tombstone("handoff", x.id); err != nil {
					return 0, nil, err
				}
				c.Handoffs++
				c.Inputs += inputs
				c.Tasks += tasks
				c.Events += events
				done++
				again = again || x.follows
			}
		}
	}
	return done, recs, nil
}

// handoffRecord is a handoff's archive line: its row, and its task, input
// requests and events if any are left.
func (e *Engine) handoffRecord(tx *Tx, id, task string) (ArchiveRecord, error) {
	row, err := rowMaps(tx.ctx, tx.q, `SELECT * FROM handoffs WHERE handoff_id = ?`, id)
	if err != nil || len(row) == 0 {
		return ArchiveRecord{}, errors.Join(err, errors.New("the handoff vanished"))
	}
	rec := e.record(tx, "handoff", id, row[0])
	rec.Related = map[string][]map[string]any{}
	for name, q := range map[string]string{
		"task":   `SELECT * FROM tasks WHERE task_id = ?`,
		"inputs": `SELECT * FROM task_inputs WHERE task_id = ?`,
	} {
		rows, err := rowMaps(tx.ctx, tx.q, q, task)
		if err != nil {
			return ArchiveRecord{}, err
		}
		if len(rows) > 0 {
			rec.Related[name] = rows
		}
	}
	events, err := rowMaps(tx.ctx, tx.q, `SELECT * FROM events WHERE substr(handoff_id, -8) = substr(?, -8) AND handoff_id = ? ORDER BY event_id`, id, id)
	if err != nil {
		return ArchiveRecord{}, err
	}
	if len(events) > 0 {
		rec.Related["events"] = events
	}
	return rec, nil
}

// pruneProposals deletes up to n decided proposals last changed before
// cutoff, text and all, oldest first (proposals_recent), and leaves a
// tombstone. Nothing references a proposal by key: a version keeps its
// proposal_id as a plain label.
func (e *Engine) pruneProposals(tx *Tx, cutoff int64, n int, c *PruneCounts) (int, []ArchiveRecord, error) {
	return e.pruneSelected(tx, "proposal", "proposals", "proposal_id", true, &c.Proposals, `SELECT proposal_id FROM proposals
		WHERE created_at <= ? AND updated_at <= ? AND status IN ('rejected','committed','conflicted','superseded')
		ORDER BY created_at LIMIT ?`, cutoff, cutoff, n)
}

// thinVersions deletes up to n versions made before cutoff that are not
// the last of their UTC day, not the newest, and not the base or result of
// any proposal still stored or the base of a live handoff; then the chunks
// no version uses any more. Versions are examined in order from where the
// last pass stopped (in memory), so the kept ones are not read again.
func (e *Engine) thinVersions(tx *Tx, cutoff int64, n int, c *PruneCounts) (int, []ArchiveRecord, error) {
	e.prune.mu.Lock()
	from := e.prune.versionsFrom
	e.prune.mu.Unlock()
	type ver struct {
		v, at int64
	}
	var list []ver
	// One row more than examined: a version is judged against the next
	// one (the last of its day?), so the newest is never examined at all.
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT version, created_at FROM versions WHERE version >= ?
		ORDER BY version LIMIT ?`, from, 4*n+1)
	if err != nil {
		return 0, nil, Internal(err)
	}
	for rows.Next() {
		var x ver
		if err := rows.Scan(&x.v, &x.at); err != nil {
			rows.Close()
			return 0, nil, Internal(err)
		}
		list = append(list, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, Internal(err)
	}
	if len(list) < 2 {
		return 0, nil, nil
	}
	kept, err := queryStrings(tx.ctx, tx.q, `SELECT base_version FROM proposals
		UNION SELECT committed_version FROM proposals WHERE committed_version IS NOT NULL
		UNION SELECT base_version FROM handoffs WHERE status IN ('open','accepted','result_ready') AND base_version IS NOT NULL`)
	if err != nil {
		return 0, nil, err
	}
	keep := make(map[int64]bool, len(kept))
	for _, s := range kept {
		v, _ := strconv.ParseInt(s, 10, 64)
		keep[v] = true
	}
	var recs []ArchiveRecord
	done := 0
	next := from
	for i := 0; i+1 < len(list) && done < n; i++ {
		x, after := list[i], list[i+1]
		if x.at > cutoff {
			break // inside the keep-all window: nothing later is due either
		}
		next = x.v + 1
		if x.at/dayMS != after.at/dayMS || keep[x.v] {
			continue // the last of its day, or something is based on it
		}
		var list []byte
		var row []map[string]any
		if e.Archive != nil {
			if row, err = rowMaps(tx.ctx, tx.q, `SELECT * FROM versions WHERE version = ?`, x.v); err != nil {
				return 0, nil, Internal(err)
			}
			text, err := VersionText(tx.ctx, tx.q, x.v)
			if err != nil {
				return 0, nil, err
			}
			if len(row) == 1 {
				row[0]["content"] = text
				recs = append(recs, e.record(tx, "version", strconv.FormatInt(x.v, 10), row[0]))
			}
		}
		if err := tx.q.QueryRowContext(tx.ctx, `DELETE FROM versions WHERE version = ? RETURNING chunk_ids`, x.v).Scan(&list); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			return 0, nil, Internal(err)
		}
		if err := addChunkRefs(tx.ctx, tx.q, list, -1); err != nil {
			return 0, nil, err
		}
		ids, err := decodeChunkList(list)
		if err != nil {
			return 0, nil, Internal(err)
		}
		for _, id := range ids {
			d, err := tx.execN(`DELETE FROM version_chunks WHERE chunk_id = ? AND refs = 0`, id)
			if err != nil {
				return 0, nil, Internal(err)
			}
			c.Chunks += d
		}
		c.Versions++
		done++
	}
	tx.after = append(tx.after, func() {
		e.prune.mu.Lock()
		if next > e.prune.versionsFrom {
			e.prune.versionsFrom = next
		}
		e.prune.mu.Unlock()
	})
	return done, recs, nil
}

// pruneSessions deletes up to n sessions that ended before cutoff, then
// leases released before it. Nothing references either.
func (e *Engine) pruneSessions(tx *Tx, cutoff int64, n int, c *PruneCounts) (int, []ArchiveRecord, error) {
	var recs []ArchiveRecord
	done := 0
	for _, k := range []struct {
		kind, table, key, col string
		count                 *int64
	}{
		{"session", "sessions", "session_ref", "ended_at", &c.Sessions},
		{"lease", "leases", "lease_id", "released_at", &c.Leases},
	} {
		if done >= n {
			break
		}
		m, r, err := e.pruneSelected(tx, k.kind, k.table, k.key, false, k.count,
			`SELECT `+k.key+` FROM `+k.table+` WHERE `+k.col+` IS NOT NULL AND `+k.col+` <= ? LIMIT ?`, cutoff, n-done)
		if err != nil {
			return 0, nil, err
		}
		done += m
		recs = append(recs, r...)
	}
	return done, recs, nil
}

// pruneInvites deletes up to n invitations revoked, expired or used up
// before cutoff (a used-up one counts from its creation).
func (e *Engine) pruneInvites(tx *Tx, cutoff int64, n int, c *PruneCounts) (int, []ArchiveRecord, error) {
	return e.pruneSelected(tx, "invitation", "invites", "invite_id", false, &c.Invitations, `SELECT invite_id FROM invites
		WHERE (revoked_at IS NOT NULL AND revoked_at <= ?) OR expires_at <= ?
		OR (max_uses IS NOT NULL AND used_count >= max_uses AND created_at <= ?) LIMIT ?`, cutoff, cutoff, cutoff, n)
}

// PruneParticipant deletes at most one participant that left before its
// window and that nothing in the sidecar names any more (its handoffs,
// proposals, versions, sessions… pruned first). It runs with foreign keys
// ON, in its own short transaction: SQLite's own check is what proves
// nothing names it, and a participant still named is remembered and not
// tried again until a restart. more says another may be due.
func (e *Engine) PruneParticipant(tx *Tx) (PruneCounts, bool, error) {
	var c PruneCounts
	w := e.Retention.Participants
	if w <= 0 {
		return c, false, nil
	}
	cutoff := tx.nowMS() - w.Milliseconds()
	ids, err := queryStrings(tx.ctx, tx.q, `SELECT participant_id FROM participants
		WHERE left_at IS NOT NULL AND left_at <= ? AND is_host = 0 ORDER BY left_at`, cutoff)
	if err != nil {
		return c, false, err
	}
	e.prune.mu.Lock()
	skip := e.prune.keptParticipants
	e.prune.mu.Unlock()
	for i, id := range ids {
		if skip[id] {
			continue
		}
		var recs []ArchiveRecord
		if err := e.archiveRow(tx, &recs, "participant", id, `SELECT * FROM participants WHERE participant_id = ?`); err != nil {
			return c, false, err
		}
		if _, err := tx.exec(`DELETE FROM participants WHERE participant_id = ?`, id); err != nil {
			if !strings.Contains(err.Error(), "FOREIGN KEY") {
				return c, false, Internal(err)
			}
			e.prune.mu.Lock()
			if e.prune.keptParticipants == nil {
				e.prune.keptParticipants = map[string]bool{}
			}
			e.prune.keptParticipants[id] = true
			e.prune.mu.Unlock()
			continue
		}
		if _, err := tx.exec(`DELETE FROM storage_usage WHERE participant_id = ?`, id); err != nil {
			return c, false, Internal(err)
		}
		if err := e.archive(recs); err != nil {
			return c, false, Internal(err)
		}
		c.Participants++
		tx.after = append(tx.after, func() {
			e.prune.mu.Lock()
			e.prune.totals.Add(c)
			e.prune.mu.Unlock()
		})
		return c, i+1 < len(ids), nil
	}
	return c, false, nil
}

// versionMissing is the answer for a version with no row: "pruned" when
// its number is between 1 and the newest (versions are numbered without
// gaps and only retention deletes one), else "does not exist".
func versionMissing(ctx context.Context, q Querier, version int64) *Error {
	var cur sql.NullInt64
	if version >= 1 && q.QueryRowContext(ctx, `SELECT max(version) FROM versions`).Scan(&cur) == nil && cur.Valid && version <= cur.Int64 {
		return Errorf(KindVersionNotFound,
			"version %d was pruned by the room's retention policy (before its window it keeps one version a day); the document is at version %d",
			version, cur.Int64).With("base_version", version).With("pruned", true).With("current_version", cur.Int64)
	}
	return Errorf(KindVersionNotFound, "version %d does not exist", version).With("base_version", version)
}
