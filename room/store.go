package room

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// applicationID marks a SQLite file as a Commonroom Go sidecar ("CRGO").
// Together with user_version it lets us refuse, untouched, a file that is not
// ours (the Python original's sidecar has the same name and another schema).
const applicationID = 0x4352474f

// SidecarPath is where a document's room lives: beside it, with the suffix
// appended to the full file name (idea.md -> idea.md.commonroom.db).
func SidecarPath(docPath string) string { return docPath + ".commonroom.db" }

// Store is the opened sidecar: one connection pool holding the single write
// connection, and a separate query-only pool for reads.
type Store struct {
	Path   string
	Writer *sql.DB // at most one connection; only the room actor uses it
	Reader *sql.DB // query_only connections for concurrent reads

	// The checkpoint connection and its threshold in pages (see
	// SetWALAutocheckpoint); nil and 0 until that asks for one.
	ckpt      *sql.DB
	ckptPages int
	ckptLeft  bool // SetWALAutocheckpoint(0): nothing in ce checkpoints

	// dir is the sidecar's directory, opened by OpenStore and held until
	// Close. Every connection names the sidecar through it (file), so
	// the read pool's later connections reach this sidecar wherever its
	// directory has been moved, and never a new one at the old path.
	dir *heldDir

	// conversion is what OpenStore did to a sidecar not yet in incremental
	// auto-vacuum mode; nil when it had nothing to do (vacuum.go).
	conversion *VacuumConversion
}

// file is the name every connection opens: the sidecar through the held
// directory.
func (s *Store) file() string { return s.dir.name(filepath.Base(s.Path)) }

func dsn(file string, pragmas ...string) string {
	u := url.URL{Scheme: "file", Path: file}
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return u.String() + "?" + q.Encode()
}

// openMode is dsn with SQLite's open mode: "rw" or "ro", never "rwc".
// Without a mode SQLite creates a missing database file, which is how a
// read pool that opened a connection after the sidecar's directory had
// been moved used to make itself a new, empty sidecar there and answer
// every read with an error (issue 25 item 5). OpenStore creates the file
// once, at start; no connection ever creates one.
func openMode(file, mode string, pragmas ...string) string {
	return dsn(file, pragmas...) + "&mode=" + mode
}

// OpenStore opens (creating if needed) the sidecar at dbPath, refuses a file
// that is not ours without writing to it, applies pending migrations, and
// returns the writer and reader pools. readOnly skips migrations and the
// writer pool (local CLI reads while another process is the writer).
//
// It opens the sidecar's directory and keeps it open until Close: the pools
// open their connections (now and whenever they need another) through that
// directory, with mode=rw or mode=ro, so no connection can create a file.
// The sidecar itself is created here, if missing, and nowhere else.
func OpenStore(ctx context.Context, dbPath string, readOnly bool) (*Store, error) {
	if err := checkForeign(ctx, dbPath, readOnly); err != nil {
		return nil, err
	}
	dir, err := openHeldDir(filepath.Dir(dbPath))
	if err != nil {
		return nil, Errorf(KindInvalidRequest, "cannot open the directory of the sidecar %s: %v", dbPath, err)
	}
	s := &Store{Path: dbPath, dir: dir}
	if !readOnly {
		if err := createSidecar(s.file()); err != nil {
			s.Close()
			return nil, Errorf(KindInternal, "cannot create the sidecar %s", dbPath).wrap(err)
		}
		// auto_vacuum comes first: on a new, empty sidecar it must be set
		// before anything writes the database's first page (journal_mode
		// does), and on an existing one it only says what the next VACUUM
		// makes it (vacuum.go).
		w, err := sql.Open("sqlite", openMode(s.file(), "rw", fmt.Sprintf("auto_vacuum(%d)", autoVacuumIncremental),
			"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(ON)", "temp_store(MEMORY)"))
		if err != nil {
			s.Close()
			return nil, Internal(err)
		}
		holdOneConn(w)
		if s.conversion, err = migrate(ctx, w); err != nil {
			w.Close()
			s.Close()
			return nil, err
		}
		s.Writer = w
	}
	r, err := sql.Open("sqlite", openMode(s.file(), "ro", "busy_timeout(5000)", "query_only(1)", "temp_store(MEMORY)"))
	if err != nil {
		s.Close()
		return nil, Internal(err)
	}
	r.SetMaxOpenConns(readerConns)
	r.SetMaxIdleConns(readerConns)
	r.SetConnMaxIdleTime(0)
	r.SetConnMaxLifetime(0)
	s.Reader = r
	if readOnly {
		var v int
		if err := r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			s.Close()
			return nil, Internal(err)
		}
		if v == 0 {
			s.Close()
			return nil, Errorf(KindNotFound, "no room has been opened for this file yet (run `ce serve` first)")
		}
	}
	if !readOnly { // a serving room's store; a one-shot reader (ce status) opens what it uses
		if err := warmReaders(ctx, r, readerConns); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// readerConns is the read pool's size: a writable store opens every
// connection at start (warmReaders) and keeps it for good.
const readerConns = 8

// warmReaders opens every connection of the read pool now, each with its
// first read done, and keeps them. SQLite resolves the held directory's
// /proc/self/fd name when it opens a database and later finds the -wal and
// -shm by the path it resolved then: a connection the pool opened lazily
// while the directory had been moved away would name them by where the
// directory was at that moment, and fail (disk I/O error) once it moved
// back. Opened at start, every connection names the directory where the
// room was opened, and its -wal and -shm are open before anything moves.
func warmReaders(ctx context.Context, r *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close() // back to the pool, which keeps all n idle
		}
	}()
	for range n {
		c, err := r.Conn(ctx)
		if err != nil {
			return Internal(err)
		}
		conns = append(conns, c)
		var pages int
		if err := c.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			return Internal(err)
		}
	}
	return nil
}

// holdOneConn makes db a single connection kept open for good: the writer's
// and the checkpointer's, whose pragmas and statement caches live on it.
func holdOneConn(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// Close closes both pools and the checkpoint connection, then the
// sidecar's directory (after them: no pool may open a connection by a
// descriptor number that could be another file's by then).
func (s *Store) Close() error {
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
	}
	if s.Writer != nil {
		errs = append(errs, s.Writer.Close())
	}
	if s.Reader != nil {
		errs = append(errs, s.Reader.Close())
	}
	errs = append(errs, s.dir.close())
	return errors.Join(errs...)
}

// createSidecar creates the sidecar empty (SQLite takes an empty file for
// a new database) unless it exists. Owner-only: ce serve has made it with
// the document's bits before (PrepareSidecar), so this is for callers that
// open a store directly, which get no wider than DESIGN §12 allows.
func createSidecar(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// checkForeign inspects an existing file through a read-only connection so a
// foreign or newer database is refused before anything writes to it.
func checkForeign(ctx context.Context, dbPath string, readOnly bool) error {
	st, err := os.Stat(dbPath)
	if errors.Is(err, fs.ErrNotExist) {
		if readOnly {
			return Errorf(KindNotFound, "no room has been opened for this file yet (run `ce serve` first)")
		}
		return nil
	}
	if err != nil {
		return Internal(err)
	}
	if st.IsDir() {
		return Errorf(KindInvalidRequest, "the sidecar path %s is a directory", dbPath)
	}
	if st.Size() == 0 {
		return nil
	}
	h, err := readSidecarHeader(ctx, dbPath)
	if err != nil {
		return Errorf(KindInvalidRequest,
			"%s exists but is not a SQLite database that ce can read; move it away or use --ephemeral", dbPath)
	}
	appID, userVersion, tables := h.appID, h.userVersion, h.tables
	if appID == 0 && userVersion == 0 && tables == 0 {
		return nil // an empty database: ours to initialise
	}
	if appID != applicationID {
		return Errorf(KindInvalidRequest,
			"%s belongs to another program (perhaps the Python commonroom); ce leaves it untouched. Move it away or run with --ephemeral", dbPath)
	}
	if userVersion > len(migrations()) {
		return Errorf(KindInvalidRequest,
			"%s was written by a newer ce (schema %d, this build knows %d); upgrade ce", dbPath, userVersion, len(migrations()))
	}
	return nil
}

type migration struct {
	version int
	sql     string
}

func migrations() []migration {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		panic(err) // embedded at build time; cannot fail
	}
	var out []migration
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			panic(fmt.Sprintf("migration %s: name must start with its number", e.Name()))
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: n, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("migrations must be numbered 1..n without gaps, found %d at %d", m.version, i+1))
		}
	}
	return out
}

// SchemaVersion is the user_version this build writes.
func SchemaVersion() int { return len(migrations()) }

// migrate applies the pending migrations, then converts a sidecar not yet
// in incremental auto-vacuum mode (vacuum.go), which it reports: a failed
// conversion is not an error, the room serves the sidecar as it was.
func migrate(ctx context.Context, db *sql.DB) (*VacuumConversion, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, Internal(err)
	}
	defer conn.Close()
	var current int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return nil, Internal(err)
	}
	applied := false
	for _, m := range migrations() {
		if m.version <= current {
			continue
		}
		if err := applyMigration(ctx, conn, m); err != nil {
			return nil, Internal(fmt.Errorf("migration %d: %w", m.version, err))
		}
		applied = true
	}
	if applied {
		// A migration that rewrites tables (6, 10) leaves a WAL as large as
		// what it copied (655 MB for migration 10 at a million handoffs),
		// and SQLite never shrinks the file by itself: copy it into the
		// database now, while nothing else reads, and give the space back.
		// Best effort: the room works the same with a long WAL.
		conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
	// Migration 6 leaves most of a sidecar older than it free; the VACUUM
	// that gave that back (compactAfterChunking, once) is now the
	// conversion's, forced for such a sidecar.
	return convertAutoVacuum(ctx, conn, current > 0 && current < chunkedVersionsSchema), nil
}

func applyMigration(ctx context.Context, conn *sql.Conn, m migration) (err error) {
	if rebuildsTables(m.version) {
		return withoutForeignKeys(ctx, conn, func() error { return applyMigrationTx(ctx, conn, m) })
	}
	return applyMigrationTx(ctx, conn, m)
}

// applyMigrationTx applies m in one transaction with its Go step, if any.
func applyMigrationTx(ctx context.Context, conn *sql.Conn, m migration) (err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err = conn.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if step := migrationSteps[m.version]; step != nil {
		if err = step(ctx, conn); err != nil {
			return err
		}
	}
	if _, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return err
	}
	if _, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
