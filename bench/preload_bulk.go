package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commonroom/ce/room"
)

// The bulk preload. Through /mcp a room takes a few hundred handoffs a
// second, so the million would take hours of the writer doing the
// same thing over and over; what the probe measures is a sidecar of that
// size, not how it got there. Bulk mode therefore lets ce write the first
// ~1,000 (so the room has real participants, sessions and rows to copy),
// stops it, writes the rest straight into the sidecar exactly as ce writes
// them, checks the file, and serves it again.

const (
	// bulkBatch is the number of handoffs (and as many tasks) per
	// transaction: large enough that commits cost nothing, small enough that
	// a transaction's WAL stays a few tens of MB.
	bulkBatch = 50000
	// bulkAbove is the --preload above which bulk is the default mode:
	// 20,000 handoffs through /mcp already take a minute or two.
	bulkAbove = 20000
	// ceApplicationID is the application_id ce stamps on its sidecars and
	// checks before it opens one (room/store.go). The bulk load refuses a
	// file without it and never changes it or user_version.
	ceApplicationID = 0x4352474f
	// bulkCacheKiB is SQLite's page cache for the load. The handoff and task
	// ids are random, so four of the indexes take inserts all over their
	// B-trees; at a million rows they are ~250 MB together, and with the
	// default 2 MB cache every insert would read pages back from disk.
	bulkCacheKiB = 512 << 10
)

// handoffIDFormat and taskIDFormat are ce's id format (room/ids.go:
// newID(prefix, 16), 128 random bits in hex). The bulk rows use the same,
// and a row ce wrote must match it, so a change there is noticed.
var (
	handoffIDFormat = regexp.MustCompile(`^handoff_[0-9a-f]{32}$`)
	taskIDFormat    = regexp.MustCompile(`^task_[0-9a-f]{32}$`)
)

func newBulkID(prefix string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// requestHash is room.createHash for a create with a summary and nothing
// else: ce keeps it on every handoff to tell an honest retry from a replay
// with other arguments (D9). It is checked against a row ce wrote.
func requestHash(summary string) []byte {
	b, _ := json.Marshal(struct {
		Summary, Constraints, Assignee, Target string
		BaseVersion                            *int64
		Follows                                string
		Artifacts                              []struct{}
	}{Summary: summary, Artifacts: []struct{}{}})
	h := sha256.Sum256(b)
	return h[:]
}

// column is one value of a row to insert, by column name.
type column struct {
	name  string
	value any
}

// bulkShape is, as code, what the mcp fill leaves behind for one handoff:
// handoff_create (room/handoff_create.go CreateHandoff: an open handoff and a
// working task, no assignee) followed by the owner's tasks/cancel
// (CancelTask: task cancelled "on request", handoff cancelled with reason
// "requested" by its owner). Every column not listed is NULL, as ce leaves
// it. The task's TTL and poll interval are the room's configuration, so they
// are read from a row ce wrote rather than assumed.
type bulkShape struct {
	ttlMs, pollMs int64
}

func (bulkShape) handoffRow(hid, tid, owner, summary string, created, ended int64) []column {
	return []column{
		{"handoff_id", hid}, {"owner_id", owner}, {"status", "cancelled"}, {"summary", summary},
		{"request_sha256", requestHash(summary)}, {"task_id", tid},
		{"created_at", created}, {"updated_at", ended},
		{"cancelled_at", ended}, {"cancelled_by", owner}, {"cancel_reason", "requested"},
	}
}

func (s bulkShape) taskRow(tid, hid, owner string, created, ended int64) []column {
	return []column{
		{"task_id", tid}, {"schema_version", int64(1)}, {"operation", "handoff.execute"},
		{"owner_id", owner}, {"correlation_id", hid}, {"status", "cancelled"},
		{"status_message", "cancelled on request"},
		{"created_at", created}, {"last_updated_at", ended},
		{"ttl_ms", s.ttlMs}, {"poll_interval_ms", s.pollMs},
	}
}

func insertSQL(table string, row []column) string {
	names := make([]string, len(row))
	for i, c := range row {
		names[i] = c.name
	}
	return fmt.Sprintf("INSERT INTO %s(%s) VALUES (?%s)", table, strings.Join(names, ", "), strings.Repeat(", ?", len(row)-1))
}

func values(row []column) []any {
	out := make([]any, len(row))
	for i, c := range row {
		out[i] = c.value
	}
	return out
}

// holdWriterLock takes the room's writer lock the way ce does (room/lock.go:
// an exclusive, non-blocking flock on FILE.commonroom.lock) and holds it for
// the load, so no `ce serve` can open the sidecar while the bench writes it.
// Failing to get it means the stopped room did not let it go.
func holdWriterLock(docPath string) (release func(), err error) {
	f, err := os.OpenFile(docPath+".commonroom.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("the room's writer lock is still held after ce stopped")
		}
		return nil, err
	}
	// Like ce: the holder's pid, for the message a would-be writer gets.
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// openSidecar opens the sidecar on one connection (the pragmas are per
// connection; foreign keys above all must be on for the one that inserts).
// synchronous=NORMAL: a crash mid-load loses the run, not a user's data.
func openSidecar(path string) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)",
		"temp_store(MEMORY)", fmt.Sprintf("cache_size(-%d)", bulkCacheKiB)} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// readRow reads one whole row with its column names.
func readRow(ctx context.Context, conn *sql.Conn, query string, args ...any) ([]string, []any, error) {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, sql.ErrNoRows
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, nil, err
	}
	return cols, vals, rows.Err()
}

// sameRow compares a row ce wrote with the row the bulk load would write
// for the same ids, owner, summary and times: column by column, NULLs
// included, so any difference in shape (or a column a migration added) stops
// the load before it writes anything.
func sameRow(table string, cols []string, got []any, want []column) error {
	w := make(map[string]any, len(want))
	for _, c := range want {
		w[c.name] = c.value
	}
	for i, name := range cols {
		v, ok := w[name]
		delete(w, name)
		if !ok {
			if got[i] != nil {
				return fmt.Errorf("%s.%s is %#v in the row ce wrote; the bulk rows would leave it NULL", table, name, got[i])
			}
			continue
		}
		same := false
		if b, isBytes := got[i].([]byte); isBytes {
			vb, ok := v.([]byte)
			same = ok && bytes.Equal(b, vb)
		} else {
			same = got[i] == v
		}
		if !same {
			return fmt.Errorf("%s.%s: ce wrote %#v, the bulk rows would hold %#v", table, name, got[i], v)
		}
	}
	for name := range w {
		return fmt.Errorf("%s has no column %s any more", table, name)
	}
	return nil
}

// learnShape reads the handoff and task of templateTask, which ce wrote
// through /mcp, and checks that bulkShape reproduces both exactly.
func learnShape(ctx context.Context, conn *sql.Conn, templateTask string, owners []string) (bulkShape, error) {
	var s bulkShape
	tcols, tvals, err := readRow(ctx, conn, `SELECT * FROM tasks WHERE task_id = ?`, templateTask)
	if err != nil {
		return s, fmt.Errorf("reading task %s written by ce: %w", templateTask, err)
	}
	get := func(cols []string, vals []any, name string) any {
		for i, c := range cols {
			if c == name {
				return vals[i]
			}
		}
		return nil
	}
	// The handoff by its primary key, named by the task row: since schema
	// 10 nothing indexes handoffs.task_id. sameRow below checks that the
	// handoff names the task back.
	hcols, hvals, err := readRow(ctx, conn, `SELECT * FROM handoffs WHERE handoff_id = ?`, get(tcols, tvals, "correlation_id"))
	if err != nil {
		return s, fmt.Errorf("reading the handoff of task %s: %w", templateTask, err)
	}
	hid, _ := get(hcols, hvals, "handoff_id").(string)
	owner, _ := get(hcols, hvals, "owner_id").(string)
	summary, _ := get(hcols, hvals, "summary").(string)
	created, _ := get(hcols, hvals, "created_at").(int64)
	ended, _ := get(hcols, hvals, "updated_at").(int64)
	s.ttlMs, _ = get(tcols, tvals, "ttl_ms").(int64)
	s.pollMs, _ = get(tcols, tvals, "poll_interval_ms").(int64)
	switch {
	case !handoffIDFormat.MatchString(hid) || !taskIDFormat.MatchString(templateTask):
		return s, fmt.Errorf("ce's ids are no longer in the expected format (%q, %q)", hid, templateTask)
	case !slices.Contains(owners, owner):
		return s, fmt.Errorf("the template handoff's owner %q is not one of the preload's participants", owner)
	case s.ttlMs <= 0 || s.pollMs <= 0:
		return s, fmt.Errorf("the template task has ttl_ms %d, poll_interval_ms %d", s.ttlMs, s.pollMs)
	}
	if err := sameRow("handoffs", hcols, hvals, s.handoffRow(hid, templateTask, owner, summary, created, ended)); err != nil {
		return s, err
	}
	if err := sameRow("tasks", tcols, tvals, s.taskRow(templateTask, hid, owner, created, ended)); err != nil {
		return s, err
	}
	return s, nil
}

// bulkTimes is where the time of a bulk fill went.
type bulkTimes struct {
	load   time.Duration // the inserts and their commits
	checks time.Duration // foreign_key_check, integrity_check, final checkpoint
}

// bulkFill writes handoffs straight into the sidecar of the stopped room
// serving file, until the preload has upTo, each with its task, in
// transactions of bulkBatch. The rows are what the mcp fill would have left
// (bulkShape), owned in turn by the preload's own participants, with every
// time "now": the tasks are terminal, so the sweeper purges them one TTL
// (24 h) after last_updated_at, long after the run. No events are written:
// the room keeps only its newest 2,000 (the ring), which ce itself wrote
// during the first fill. The file is checked before ce sees it again.
func (p *preloader) bulkFill(ctx context.Context, e *env, file string, owners []string, upTo int) (bulkTimes, error) {
	var bt bulkTimes
	p.mu.Lock()
	have := len(p.taskIDs)
	template := ""
	if have > 0 {
		template = p.taskIDs[0]
	}
	p.mu.Unlock()
	if template == "" || len(owners) == 0 {
		return bt, errors.New("the bulk load needs participants and a handoff written by ce first")
	}
	release, err := holdWriterLock(file)
	if err != nil {
		return bt, err
	}
	defer release()
	db, err := openSidecar(file + ".commonroom.db")
	if err != nil {
		return bt, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return bt, err
	}
	defer conn.Close()

	pragma := func(name string) (string, error) {
		var v string
		err := conn.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
		return v, err
	}
	// identity is what ce checks before it opens a sidecar (room/store.go
	// checkForeign); the load must leave both exactly as they were.
	type identity struct{ appID, userVersion int }
	readIdentity := func() (identity, error) {
		var id identity
		err := conn.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id.appID)
		if err == nil {
			err = conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&id.userVersion)
		}
		return id, err
	}
	id0, err := readIdentity()
	if err != nil {
		return bt, err
	}
	if id0.appID != ceApplicationID || id0.userVersion < 1 {
		return bt, fmt.Errorf("the sidecar's application_id is %#x and user_version %d: not a ce room", id0.appID, id0.userVersion)
	}
	if fk, err := pragma("foreign_keys"); err != nil || fk != "1" {
		return bt, fmt.Errorf("foreign keys are not on for the load (%q, %v)", fk, err)
	}
	if jm, err := pragma("journal_mode"); err != nil || jm != "wal" {
		return bt, fmt.Errorf("journal_mode is %q, not wal (%v)", jm, err)
	}
	shape, err := learnShape(ctx, conn, template, owners)
	if err != nil {
		return bt, fmt.Errorf("the bulk rows would not match ce's: %w", err)
	}
	counts := func() (h, t int64, err error) {
		err = conn.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM handoffs), (SELECT count(*) FROM tasks)`).Scan(&h, &t)
		return
	}
	h0, t0, err := counts()
	if err != nil {
		return bt, err
	}

	n := max(upTo-have, 0)
	hSQL := insertSQL("handoffs", shape.handoffRow("", "", "", "", 0, 0))
	tSQL := insertSQL("tasks", shape.taskRow("", "", "", 0, 0))
	ids := make([]string, 0, n)
	start := time.Now()
	e.logf("preload bulk: inserting %d handoffs and their tasks into %s, %d per transaction", n, file+".commonroom.db", bulkBatch)
	for done := 0; done < n; {
		k := min(bulkBatch, n-done)
		if err := p.bulkBatch(ctx, conn, shape, hSQL, tSQL, owners, have+done, k, &ids); err != nil {
			return bt, err
		}
		done += k
		el := time.Since(start)
		rate := float64(done) / el.Seconds()
		eta := time.Duration(float64(n-done)/max(rate, 1)) * time.Second
		e.logf("preload bulk: %d/%d handoffs, %.0f/s, about %s to go", have+done, upTo, rate, eta.Round(time.Second))
	}
	bt.load = time.Since(start)

	e.logf("preload bulk: checking the sidecar (foreign_key_check, integrity_check)")
	start = time.Now()
	if err := checkSidecar(ctx, conn); err != nil {
		return bt, err
	}
	h1, t1, err := counts()
	switch {
	case err != nil:
		return bt, err
	case h1 != h0+int64(n) || t1 != t0+int64(n):
		return bt, fmt.Errorf("after inserting %d: handoffs %d → %d, tasks %d → %d", n, h0, h1, t0, t1)
	}
	if id1, err := readIdentity(); err != nil || id1 != id0 {
		return bt, fmt.Errorf("application_id/user_version changed during the load: %+v → %+v (%v)", id0, id1, err)
	}
	// Leave ce a sidecar with an empty WAL, as a graceful stop of ce does.
	var busy, logPages, ckpt int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &ckpt); err != nil || busy != 0 {
		return bt, fmt.Errorf("final checkpoint: busy %d (%v)", busy, err)
	}
	bt.checks = time.Since(start)

	p.mu.Lock()
	p.taskIDs = append(p.taskIDs, ids...)
	p.mu.Unlock()
	p.created.Add(int64(n))
	return bt, nil
}

// bulkBatch inserts k handoffs and their tasks in one transaction. The
// summaries go on from the mcp fill's ("preloaded <n> by <worker>"), and
// owner i is the participant of preload worker i, as it would have been.
func (p *preloader) bulkBatch(ctx context.Context, conn *sql.Conn, shape bulkShape, hSQL, tSQL string, owners []string, first, k int, ids *[]string) (err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	hs, err := tx.PrepareContext(ctx, hSQL)
	if err != nil {
		return err
	}
	defer hs.Close()
	ts, err := tx.PrepareContext(ctx, tSQL)
	if err != nil {
		return err
	}
	defer ts.Close()
	for i := range k {
		seq := first + i + 1
		w := seq % len(owners)
		hid, tid := newBulkID("handoff"), newBulkID("task")
		now := time.Now().UnixMilli()
		if _, err := hs.ExecContext(ctx, values(shape.handoffRow(hid, tid, owners[w], fmt.Sprintf("preloaded %d by %d", seq, w), now, now))...); err != nil {
			return fmt.Errorf("inserting handoff %d: %w", seq, err)
		}
		if _, err := ts.ExecContext(ctx, values(shape.taskRow(tid, hid, owners[w], now, now))...); err != nil {
			return fmt.Errorf("inserting task %d: %w", seq, err)
		}
		*ids = append(*ids, tid)
	}
	return tx.Commit()
}

// checkSidecar fails on any row PRAGMA foreign_key_check reports and on any
// answer of PRAGMA integrity_check but "ok".
func checkSidecar(ctx context.Context, conn *sql.Conn) error {
	if err := room.CheckForeignKeys(ctx, conn); err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return err
	}
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return err
		}
		msgs = append(msgs, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(msgs) != 1 || msgs[0] != "ok" {
		if len(msgs) > 5 {
			msgs = append(msgs[:5], "…")
		}
		return fmt.Errorf("integrity_check: %s", strings.Join(msgs, "; "))
	}
	return nil
}
