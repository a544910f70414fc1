package room_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/commonroom/ce/room"
)

// openSidecar opens (creating) a sidecar at dir/idea.md.commonroom.db.
func openSidecar(t *testing.T, path string) *room.Store {
	t.Helper()
	st, err := room.OpenStore(context.Background(), path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fillAndFree writes about n pages of rows into a table of their own, then
// deletes every other row and then the rest of the first half, so the free
// pages lie all over the file (as a room's deletes leave them), not only
// at its end.
func fillAndFree(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS filler(id INTEGER PRIMARY KEY, b BLOB)`,
		`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < ?) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`,
		`DELETE FROM filler WHERE id % 2 = 0 OR id < (SELECT max(id) FROM filler) / 2`,
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		var args []any
		if q[0] == 'W' {
			args = []any{n}
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestNewSidecarGivesFreePagesBackInSteps: a sidecar this ce creates is in
// incremental auto-vacuum mode, so the pages deletes free can be given back
// a few at a time: each step lowers the free pages by at most its size,
// and once they are all given back and the WAL is checkpointed the file is
// smaller by about what was freed.
func TestNewSidecarGivesFreePagesBackInSteps(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	st := openSidecar(t, path)
	sp, err := st.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Created so, not converted by a VACUUM after its tables were made.
	if _, converted := st.Conversion(); sp.AutoVacuum != "incremental" || converted {
		t.Fatalf("a new sidecar's auto_vacuum is %q (converted: %v), want incremental from the start", sp.AutoVacuum, converted)
	}
	fillAndFree(t, st.Writer, 2000)
	before, err := st.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.FreePages < 1000 {
		t.Fatalf("%d free pages after the deletes, want more than 1,000", before.FreePages)
	}
	conn, err := st.Writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const step = 64
	free, steps := before.FreePages, 0
	for free > 0 {
		was, now, err := room.VacuumStep(ctx, conn, step)
		if err != nil {
			t.Fatal(err)
		}
		if was != free || now >= was || was-now > step {
			t.Fatalf("step %d: free pages %d → %d (expected from %d, by 1 to %d)", steps, was, now, free, step)
		}
		free = now
		steps++
	}
	if ok, err := room.TruncateWAL(ctx, conn, 0); err != nil || !ok {
		t.Fatalf("truncating the WAL: %v, %v", ok, err)
	}
	after, err := st.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The pointer-map pages of the part given back go too.
	if after.FreePages != 0 || after.PageCount > before.PageCount-before.FreePages {
		t.Errorf("after the steps: %d pages, %d free; want at most %d, 0", after.PageCount, after.FreePages, before.PageCount-before.FreePages)
	}
	if got, want := fileSize(t, path), after.PageCount*after.PageSize; got != want || got > before.DBBytes-before.FreePages*before.PageSize/2 {
		t.Errorf("the database file is %d bytes after %d steps (was %d, %d pages free): want %d", got, steps, before.DBBytes, before.FreePages, want)
	}
	var rows int
	if err := st.Reader.QueryRow(`SELECT count(*) FROM filler`).Scan(&rows); err != nil || rows == 0 {
		t.Errorf("the rows left after the steps: %d (%v)", rows, err)
	}
	if _, _, err := room.VacuumStep(ctx, conn, 0); err == nil {
		t.Error("a step of 0 pages was taken")
	}
}

// makeOld rewrites the sidecar at path as a ce before issue 26 left it:
// auto_vacuum NONE.
func makeOld(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA auto_vacuum = NONE`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var mode int
	if err := db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 0 {
		t.Fatalf("auto_vacuum %d (%v) after making the sidecar old", mode, err)
	}
}

// TestOpenStoreConvertsAnOldSidecarOnce: a sidecar in auto_vacuum NONE is
// converted at open by one VACUUM, which keeps every row and reports its
// time; a sidecar already converted (or new) is left alone, so the
// conversion is decided by the mode and runs exactly once.
func TestOpenStoreConvertsAnOldSidecarOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	st, err := room.OpenStore(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Conversion(); ok {
		t.Error("a new sidecar was converted")
	}
	fillAndFree(t, st.Writer, 500)
	st.Close()
	makeOld(t, path)
	var rows int
	count := func(st *room.Store) int {
		var n int
		if err := st.Reader.QueryRow(`SELECT count(*) FROM filler`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		converts bool
	}{
		{"an_old_sidecar_is_converted", true},
		{"a_converted_sidecar_is_left_alone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := room.OpenStore(ctx, path, false)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			conv, ok := st.Conversion()
			if ok != tc.converts || conv.Err != nil {
				t.Fatalf("conversion ran: %v (%+v), want %v", ok, conv, tc.converts)
			}
			if tc.converts && conv.Took <= 0 {
				t.Errorf("the conversion took %v", conv.Took)
			}
			sp, err := st.Space(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if sp.AutoVacuum != "incremental" || sp.FreePages != 0 {
				t.Errorf("after opening: auto_vacuum %q, %d free pages; want incremental, 0", sp.AutoVacuum, sp.FreePages)
			}
			if rows == 0 {
				rows = count(st)
			}
			if n := count(st); n != rows || n == 0 {
				t.Errorf("%d rows after opening, want %d", n, rows)
			}
		})
	}
}

// TestAFullDiskDuringTheConversionChangesNothing: VACUUM writes the whole
// database through the WAL; on a disk with no room for that, it fails, and
// the sidecar is served as it was (same mode, every row, writable), the
// WAL it half wrote given back. The disk is a real 4 MiB tmpfs, which needs
// root (the test is skipped without).
func TestAFullDiskDuringTheConversionChangesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	// The VACUUM's temporary copy goes to the temporary directory (/tmp or
	// TMPDIR), not this disk: it is the sidecar's own directory that fills.
	// The old sidecar is made elsewhere (making it old is a VACUUM too)
	// and copied onto the small disk.
	src := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	st := openSidecar(t, src)
	// About 2.5 MiB of rows, none free: the VACUUM needs as much again.
	if _, err := st.Writer.Exec(`CREATE TABLE filler(id INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Writer.Exec(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < 800) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	makeOld(t, src)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "idea.md.commonroom.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	old := int64(len(b))

	st, err = room.OpenStore(ctx, path, false)
	if err != nil {
		t.Fatalf("a failed conversion failed the open: %v", err)
	}
	defer st.Close()
	conv, ok := st.Conversion()
	if !ok || conv.Err == nil {
		t.Fatalf("the conversion on a full disk: ran %v, %+v; want it to fail", ok, conv)
	}
	t.Logf("the conversion failed: %v", conv.Err)
	sp, err := st.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sp.AutoVacuum != "none" || sp.DBBytes != old || sp.WALBytes != 0 {
		t.Errorf("after the failed conversion: auto_vacuum %q, db %d bytes (was %d), WAL %d bytes; want none, unchanged, 0",
			sp.AutoVacuum, sp.DBBytes, old, sp.WALBytes)
	}
	var n int
	if err := st.Reader.QueryRow(`SELECT count(*) FROM filler`).Scan(&n); err != nil || n != 800 {
		t.Errorf("%d rows (%v) after the failed conversion, want 800", n, err)
	}
	if _, err := st.Writer.Exec(`INSERT INTO filler(b) VALUES (x'00')`); err != nil {
		t.Errorf("the sidecar takes no write after the failed conversion: %v", err)
	}
	if err := st.CompactOffline(ctx); err == nil {
		t.Error("ce compact's VACUUM succeeded on the full disk")
	}
}
