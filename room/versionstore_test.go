package room_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// checkEveryVersion rebuilds every version of the room and compares it,
// byte for byte, with the text it was committed with; the row's size and
// content_sha256 must describe that text too.
func checkEveryVersion(t *testing.T, d docRoom, want map[int64]string) {
	t.Helper()
	ctx := context.Background()
	if n := d.version(); n != int64(len(want)) {
		t.Fatalf("%d versions, want %d", n, len(want))
	}
	for v := int64(1); v <= int64(len(want)); v++ {
		got, err := room.VersionText(ctx, d.store.Reader, v)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if got != want[v] {
			t.Fatalf("version %d rebuilt to %d bytes (sha %s), want %d bytes (sha %s)",
				v, len(got), sha256Hex(got)[:12], len(want[v]), sha256Hex(want[v])[:12])
		}
		var size int64
		var hash string
		if err := d.store.Reader.QueryRow(`SELECT size, content_sha256 FROM versions WHERE version = ?`, v).Scan(&size, &hash); err != nil {
			t.Fatal(err)
		}
		if size != int64(len(want[v])) || hash != sha256Hex(want[v]) {
			t.Fatalf("version %d row says size %d hash %s; the text is %d bytes, hash %s", v, size, hash, len(want[v]), sha256Hex(want[v]))
		}
	}
}

// randomEdit changes text the way people and tools do: lines replaced,
// inserted or deleted, a block pasted or cut, the whole text replaced or
// emptied, an earlier text restored.
func randomEdit(rng *rand.Rand, text string, earlier []string) string {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	pos := func() int { return rng.IntN(len(lines) + 1) }
	switch k := rng.IntN(20); {
	case k < 6 && len(lines) > 0: // replace a line
		lines[rng.IntN(len(lines))] = proseLine(rng)
	case k < 10: // insert lines
		i := pos()
		var add []string
		for range 1 + rng.IntN(3) {
			add = append(add, proseLine(rng))
		}
		lines = append(lines[:i], append(add, lines[i:]...)...)
	case k < 13 && len(lines) > 0: // delete lines
		i := rng.IntN(len(lines))
		j := min(len(lines), i+1+rng.IntN(4))
		lines = append(lines[:i], lines[j:]...)
	case k < 15: // paste a block of 10-150 KiB (past several chunk bounds)
		i := pos()
		block := proseLines(rng.Uint64(), 10<<10+rng.IntN(140<<10))
		lines = append(lines[:i], append(block, lines[i:]...)...)
	case k < 16 && len(lines) > 0: // cut a block
		i := rng.IntN(len(lines))
		j := min(len(lines), i+rng.IntN(2000))
		lines = append(lines[:i], lines[j:]...)
	case k < 17: // a byte that is not prose, and no final newline
		return strings.Join(lines, "") + "é\x00\xff"[:rng.IntN(4)]
	case k < 18 && len(earlier) > 0: // restore an earlier text
		return earlier[rng.IntN(len(earlier))]
	case k < 19: // empty the document
		return ""
	default: // a whole new document
		return strings.Join(proseLines(rng.Uint64(), rng.IntN(200<<10)), "")
	}
	return strings.Join(lines, "")
}

// Every version rebuilds byte for byte after random edit sequences,
// including texts that share chunks with versions far back, texts of
// every size around the chunk bounds, and after the room restarts.
func TestVersionStore_RandomEditsEveryVersionRebuilds(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d rebuilds every version", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			start := strings.Join(proseLines(seed, 96<<10), "")
			d := newDocRoom(t, withDocText(start))
			want := map[int64]string{1: start}
			var texts []string
			text := start
			for range 30 {
				texts = append(texts, text)
				next := randomEdit(rng, text, texts)
				if next == text {
					continue // the same text again is no version
				}
				res := d.rawCommit(next)
				want[res.Version] = next
				text = next
			}
			checkEveryVersion(t, d, want)
			d.restart()
			checkEveryVersion(t, d, want)
		})
	}
}

// Texts whose lengths sit on and around the chunker's bounds (empty, one
// byte, 2/8/64 KiB ± 1, and several times the largest chunk) rebuild
// exactly, and so does a text of one repeated byte, where the rolling
// hash finds no cut and every chunk is cut at the largest size.
func TestVersionStore_ChunkBoundsRebuild(t *testing.T) {
	d := newDocRoom(t)
	want := map[int64]string{1: testDoc}
	prose := strings.Join(proseLines(7, 300<<10), "")
	for _, n := range []int{0, 1, 2<<10 - 1, 2 << 10, 2<<10 + 1, 8<<10 - 1, 8 << 10, 8<<10 + 1,
		64<<10 - 1, 64 << 10, 64<<10 + 1, 200<<10 + 3} {
		text := prose[:n]
		if text == d.fileText() {
			continue
		}
		want[d.rawCommit(text).Version] = text
	}
	same := strings.Repeat("x", 200<<10+5)
	want[d.rawCommit(same).Version] = same
	checkEveryVersion(t, d, want)
}

// A one-line commit to a 1 MiB document stores a few KiB, not the
// document again (it stored 1 MiB per commit when every version was kept
// in full). The text is prose, so compression does not flatter it.
func TestVersionStore_OneLineCommitStoresLittle(t *testing.T) {
	lines := proseLines(1, 1<<20)
	d := newDocRoom(t, withDocText(strings.Join(lines, "")))
	rng := rand.New(rand.NewPCG(5, 6))
	const commits = 10
	before := usedBytes(t, d.store.Reader)
	for range commits {
		lines[1+rng.IntN(len(lines)-1)] = proseLine(rng)
		d.rawCommit(strings.Join(lines, ""))
	}
	per := (usedBytes(t, d.store.Reader) - before) / commits
	t.Logf("%d bytes stored per one-line commit to a %d-byte document", per, len(strings.Join(lines, "")))
	if per > 16<<10 {
		t.Fatalf("a one-line commit stored %d bytes, want at most 16 KiB", per)
	}
}

// A chunk changed on disk (a damaged sidecar) makes reading the versions
// that use it fail with internal, never answer a different text.
func TestVersionStore_DamagedChunkIsAnErrorNotOtherText(t *testing.T) {
	d := newDocRoom(t, withDocText(strings.Join(proseLines(3, 40<<10), "")))
	d.close()
	db, err := sql.Open("sqlite", room.SidecarPath(d.doc))
	if err != nil {
		t.Fatal(err)
	}
	// Swap the text of the first chunk for other text of the same size.
	if _, err := db.Exec(`UPDATE version_chunks SET codec = 0, data = CAST(zeroblob(size) AS BLOB) WHERE chunk_id = (SELECT min(chunk_id) FROM version_chunks)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	_, err = room.VersionText(context.Background(), db, 1)
	db.Close()
	if room.ErrorKind(err) != room.KindInternal || !strings.Contains(err.Error(), "does not match its stored hash") {
		t.Fatalf("reading a damaged version: %v, want internal: does not match its stored hash", err)
	}
}

// oldSidecar writes a sidecar the way ce left it before issue 17 (schema
// 5: every version's text in versions.content) holding texts, and the
// document holding the newest of them.
func oldSidecar(t *testing.T, texts []string) (doc string) {
	t.Helper()
	ctx := context.Background()
	doc = filepath.Join(t.TempDir(), "idea.md")
	if err := os.WriteFile(doc, []byte(texts[len(texts)-1]), 0o644); err != nil {
		t.Fatal(err)
	}
	side := room.SidecarPath(doc)
	if err := room.MigrateTo(ctx, side, 5); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", side)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO meta(key, value) VALUES ('workspace_id', 'workspace_0123456789abcdef'), ('lifecycle', 'ACTIVE'), ('created_at', '2026-08-01T09:00:00.000Z')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i, text := range texts {
		source := "raw_commit"
		if i == 0 {
			source = "bootstrap"
		}
		if _, err := db.Exec(`INSERT INTO versions(version, content, content_sha256, summary, source, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			i+1, text, sha256Hex(text), fmt.Sprintf("edit %d", i+1), source, 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	return doc
}

// A sidecar an older ce wrote is migrated in place: every version's text,
// hash and summary survive, the texts leave versions.content for shared
// chunks, and the room's readers of old versions answer as before.
func TestVersionStore_MigratesAnOldSidecar(t *testing.T) {
	ctx := context.Background()
	lines := proseLines(11, 200<<10)
	texts := []string{strings.Join(lines, "")}
	for i := range 5 {
		lines[10+i*300] = fmt.Sprintf("line changed in edit %d.\n", i)
		texts = append(texts, strings.Join(lines, ""))
	}
	texts = append(texts, "", texts[2]) // emptied, then restored
	doc := oldSidecar(t, texts)
	side := room.SidecarPath(doc)

	// Read before the migration, the way a query-only local read does.
	v, text, err := room.NewestVersion(ctx, side)
	if err != nil || v != int64(len(texts)) || text != texts[len(texts)-1] {
		t.Fatalf("NewestVersion of the old sidecar: v%d %d bytes, %v", v, len(text), err)
	}
	st, err := room.OpenStore(ctx, side, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := room.VersionText(ctx, st.Reader, 3); err != nil || got != texts[2] {
		t.Fatalf("version 3 of the old sidecar read query-only: %d bytes, %v", len(got), err)
	}
	oldUsed := usedBytes(t, st.Reader)
	st.Close()

	e := &env{tb: t, doc: doc, clock: newFakeClock(), limits: room.Defaults(), pub: &recorder{}}
	e.open()
	t.Cleanup(e.close)
	d := docRoom{e}
	if v := e.scalar(`PRAGMA user_version`); v != int64(room.SchemaVersion()) {
		t.Fatalf("user_version = %d, want %d", v, room.SchemaVersion())
	}
	if n := e.scalar(`SELECT count(*) FROM pragma_table_info('versions') WHERE name = 'content'`); n != 0 {
		t.Fatal("versions.content is still there")
	}
	want := map[int64]string{}
	for i, text := range texts {
		want[int64(i+1)] = text
	}
	checkEveryVersion(t, d, want)
	if got := e.dump(`SELECT version, summary, source, created_at FROM versions ORDER BY version`); !strings.Contains(got, "summary=edit 4|source=raw_commit|created_at=1003|") {
		t.Errorf("the version rows lost their fields:\n%s", got)
	}
	if free := e.scalar(`SELECT freelist_count FROM pragma_freelist_count()`); free != 0 {
		t.Errorf("%d free pages after the migration: the space the texts took was not given back", free)
	}
	newUsed := usedBytes(t, e.store.Reader)
	t.Logf("%d versions: %d bytes used before the migration, %d after", len(texts), oldUsed, newUsed)
	if newUsed*3 > oldUsed {
		t.Errorf("the migrated versions use %d bytes, the old ones %d: the texts are not shared", newUsed, oldUsed)
	}

	// The readers of old versions: a diff against version 2, and a stale
	// commit against it.
	admin := e.op()
	diff, err := read(e, func(eng *room.Engine, q room.Querier) (room.DiffResult, error) {
		return eng.Diff(ctx, q, admin, room.DiffInput{BaseVersion: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	var plus, minus []string
	for _, l := range strings.Split(diff.Diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			plus = append(plus, l)
		case strings.HasPrefix(l, "-"):
			minus = append(minus, l)
		}
	}
	// Version 2 has edit 0; the current (8, version 3's text) has edit 1 too.
	if len(plus) != 1 || plus[0] != "+line changed in edit 1." || len(minus) != 1 {
		t.Fatalf("diff from version 2:\n%s", diff.Diff)
	}
	_, err = d.commit(admin, room.CommitInput{BaseVersion: refOf(int64(2)), Summary: "late", Content: refOf("late\n")})
	if room.ErrorKind(err) != room.KindStaleVersion {
		t.Fatalf("a commit on version 2: %v, want stale_version", err)
	}
	// And a new commit after the migration shares the migrated chunks.
	before := usedBytes(t, e.store.Reader)
	cur := strings.SplitAfter(texts[len(texts)-1], "\n")
	cur[2000] = "a line committed after the migration.\n"
	want[d.rawCommit(strings.Join(cur, "")).Version] = strings.Join(cur, "")
	if grew := usedBytes(t, e.store.Reader) - before; grew > 16<<10 {
		t.Errorf("a one-line commit after the migration stored %d bytes", grew)
	}
	checkEveryVersion(t, d, want)
}
