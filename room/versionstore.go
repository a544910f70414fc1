package room

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// The version store. Every version of the document is kept for good, and
// most versions differ from the one before by a few lines, so storing each
// in full made a one-line commit to a 1 MiB document cost a mebibyte of
// sidecar (issue 17). A version's text is instead cut into content-defined
// chunks (a rolling hash picks the cut points, so an edit moves only the
// cuts next to it) and each distinct chunk is stored once, compressed,
// keyed by its SHA-256; the version row keeps the list of its chunks.
//
// Rebuilding any version reads exactly its own chunks: there is no chain of
// deltas to replay, so the cost of reading a version is bounded by its own
// size (one row lookup and one decompression per ~8 KiB), whatever its age,
// and the current version costs what every other does. A rebuilt text is
// checked against its size and its content_sha256 before anyone sees it.
//
// The cut points only decide how much is shared; they never decide what a
// version reads back. Changing the chunker later would store new text in
// new chunks beside the old ones and every version would still rebuild.

const (
	// chunkMin, chunkAvg and chunkMax bound the chunks: a one-line edit
	// rewrites on average one chunk (about 8 KiB, ~3 KiB compressed), and
	// a 200 MB document is about 25,000 chunks, a list of ~25 KB per version.
	chunkMin = 2 << 10
	chunkAvg = 8 << 10
	chunkMax = 64 << 10
	// maskHard and maskEasy are FastCDC's normalised chunking: a cut is
	// harder to find before chunkAvg and easier after it, which narrows
	// the spread of chunk sizes around chunkAvg.
	maskHard = uint64(1<<15-1) << 49
	maskEasy = uint64(1<<11-1) << 53
)

// codecs of a stored chunk.
const (
	codecRaw  = 0 // the bytes as they are: compression would not save anything
	codecZstd = 1 // one zstd frame
)

// gear is the rolling hash's table: 256 fixed pseudo-random words
// (splitmix64 from a fixed seed), the same in every build.
var gear = func() (t [256]uint64) {
	x := uint64(0x636f6d6d6f6e726f) // "commonro"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		t[i] = z ^ z>>31
	}
	return t
}()

// cutPoint returns the length of the first chunk of s.
func cutPoint(s string) int {
	n := len(s)
	if n <= chunkMin {
		return n
	}
	if n > chunkMax {
		n = chunkMax
	}
	normal := min(chunkAvg, n)
	var h uint64
	i := chunkMin
	for ; i < normal; i++ {
		h = h<<1 + gear[s[i]]
		if h&maskHard == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = h<<1 + gear[s[i]]
		if h&maskEasy == 0 {
			return i + 1
		}
	}
	return n
}

// chunksOf calls fn with each chunk of text in order.
func chunksOf(text string, fn func(piece string) error) error {
	for len(text) > 0 {
		n := cutPoint(text)
		if err := fn(text[:n]); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

// The codec is stateless between calls (EncodeAll and DecodeAll are safe
// for concurrent use), so one of each serves the process.
var (
	chunkEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
			zstd.WithWindowSize(chunkMax), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err) // fixed, valid options
		}
		return enc
	})
	chunkDecoder = sync.OnceValue(func() *zstd.Decoder {
		// Concurrency 0: as many concurrent DecodeAll calls as GOMAXPROCS,
		// so readers rebuilding old versions do not queue behind each other.
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(1<<20), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(err)
		}
		return dec
	})
)

// bytesOf views s as bytes without copying it; the bytes are only read.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// storedText is what a version row keeps of its text: its length and the
// list of its chunks (see encodeChunkList).
type storedText struct {
	size  int64
	chunk []byte
}

// storeText stores the chunks of text that are not stored yet and returns
// the version row's part. It runs in the caller's transaction, so chunks of
// a command that rolls back go with it.
func storeText(ctx context.Context, q Querier, text string) (storedText, error) {
	ids := make([]int64, 0, len(text)/chunkAvg+1)
	err := chunksOf(text, func(piece string) error {
		sum := sha256.Sum256(bytesOf(piece))
		var id int64
		err := q.QueryRowContext(ctx, `SELECT chunk_id FROM version_chunks WHERE sha256 = ?`, sum[:]).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			codec, data := codecRaw, bytesOf(piece)
			if z := chunkEncoder().EncodeAll(data, make([]byte, 0, len(piece)/2)); len(z) < len(piece) {
				codec, data = codecZstd, z
			}
			res, ierr := q.ExecContext(ctx, `INSERT INTO version_chunks(sha256, size, codec, data) VALUES (?, ?, ?, ?)`,
				sum[:], len(piece), codec, data)
			if ierr != nil {
				return ierr
			}
			id, err = res.LastInsertId()
		}
		if err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return storedText{}, Internal(err)
	}
	return storedText{size: int64(len(text)), chunk: encodeChunkList(ids)}, nil
}

// encodeChunkList writes chunk ids as zig-zag varint differences from the
// previous id: a new document's chunks are numbered in a row, so most ids
// take one byte.
func encodeChunkList(ids []int64) []byte {
	out := make([]byte, 0, len(ids)+8)
	prev := int64(0)
	for _, id := range ids {
		out = binary.AppendVarint(out, id-prev)
		prev = id
	}
	return out
}

func decodeChunkList(b []byte) ([]int64, error) {
	var ids []int64
	prev := int64(0)
	for len(b) > 0 {
		d, n := binary.Varint(b)
		if n <= 0 {
			return nil, errors.New("the chunk list is corrupt")
		}
		prev += d
		ids = append(ids, prev)
		b = b[n:]
	}
	return ids, nil
}

// loadText rebuilds a text of size bytes from its chunk list into one
// buffer of exactly that size (the only copy of the text it makes).
func loadText(ctx context.Context, q Querier, size int64, list []byte) (string, error) {
	ids, err := decodeChunkList(list)
	if err != nil {
		return "", err
	}
	if size == 0 && len(ids) == 0 {
		return "", nil
	}
	if size < 0 || size > 1<<40 {
		return "", fmt.Errorf("implausible text size %d", size)
	}
	buf := make([]byte, size)
	off := int64(0)
	var data []byte
	for _, id := range ids {
		var n int64
		var codec int
		data = data[:0]
		if err := q.QueryRowContext(ctx, `SELECT size, codec, data FROM version_chunks WHERE chunk_id = ?`, id).
			Scan(&n, &codec, &data); err != nil {
			return "", fmt.Errorf("chunk %d: %w", id, err)
		}
		if n <= 0 || off+n > size {
			return "", fmt.Errorf("chunk %d does not fit the text's size", id)
		}
		dst := buf[off : off : off+n]
		switch codec {
		case codecRaw:
			dst = append(dst, data...)
		case codecZstd:
			dst, err = chunkDecoder().DecodeAll(data, dst)
			if err != nil {
				return "", fmt.Errorf("chunk %d: %w", id, err)
			}
		default:
			return "", fmt.Errorf("chunk %d has unknown codec %d", id, codec)
		}
		if int64(len(dst)) != n || (n > 0 && &dst[0] != &buf[off]) {
			return "", fmt.Errorf("chunk %d holds %d bytes, its row says %d", id, len(dst), n)
		}
		off += n
	}
	if off != size {
		return "", fmt.Errorf("the chunks hold %d bytes, the version %d", off, size)
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf)), nil // buf is never written again
}

// insertVersion stores content and writes its version row.
func (tx *Tx) insertVersion(v int64, content, hash, summary, source, participantID, proposalID string) error {
	st, err := storeText(tx.ctx, tx.q, content)
	if err != nil {
		return err
	}
	if _, err := tx.exec(`INSERT INTO versions(version, content_sha256, size, chunk_ids, summary, source, participant_id, proposal_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v, hash, st.size, st.chunk, summary, source, nullStr(participantID), nullStr(proposalID), tx.nowMS()); err != nil {
		return Internal(err)
	}
	return addChunkRefs(tx.ctx, tx.q, st.chunk, 1)
}

// addChunkRefs adds delta to the refs of every chunk a version's list
// names (each mention once): +1 when the version is stored, -1 when
// retention prunes it (migration 13).
func addChunkRefs(ctx context.Context, q Querier, list []byte, delta int) error {
	ids, err := decodeChunkList(list)
	if err != nil {
		return Internal(err)
	}
	for _, id := range ids {
		if _, err := q.ExecContext(ctx, `UPDATE version_chunks SET refs = refs + ? WHERE chunk_id = ?`, delta, id); err != nil {
			return Internal(err)
		}
	}
	return nil
}

// chunkRefsSchema is the migration that added version_chunks.refs.
const chunkRefsSchema = 13

// countChunkRefs is migration 13's step: it counts, for the versions
// already stored, how many times each chunk is named, one version's list
// in memory at a time.
func countChunkRefs(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `SELECT chunk_ids FROM versions`)
	if err != nil {
		return err
	}
	counts := map[int64]int64{}
	for rows.Next() {
		var list []byte
		if err := rows.Scan(&list); err != nil {
			rows.Close()
			return err
		}
		ids, err := decodeChunkList(list)
		if err != nil {
			rows.Close()
			return err
		}
		for _, id := range ids {
			counts[id]++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for id, n := range counts {
		if _, err := conn.ExecContext(ctx, `UPDATE version_chunks SET refs = ? WHERE chunk_id = ?`, n, id); err != nil {
			return err
		}
	}
	return nil
}

// readVersion reads one version (0 = the newest), rebuilt and checked
// against its stored hash. A sidecar an older ce wrote (schema 5 or
// before, still holding versions.content) is read as it is: local reads
// open it query-only and never migrate it.
func readVersion(ctx context.Context, q Querier, version int64) (versionRow, error) {
	var r versionRow
	var size int64
	var list []byte
	where, args := `ORDER BY version DESC LIMIT 1`, []any(nil)
	if version != 0 {
		where, args = `WHERE version = ?`, []any{version}
	}
	err := q.QueryRowContext(ctx, `SELECT version, content_sha256, size, chunk_ids FROM versions `+where, args...).
		Scan(&r.version, &r.hash, &size, &list)
	if err != nil && isNoSuchColumn(err) {
		err = q.QueryRowContext(ctx, `SELECT version, content_sha256, content FROM versions `+where, args...).
			Scan(&r.version, &r.hash, &r.content)
		if err == nil && contentHash(r.content) != r.hash {
			return r, Errorf(KindInternal, "version %d's text does not match its stored hash", r.version)
		}
		return r, err
	}
	if err != nil {
		return r, err
	}
	if r.content, err = loadText(ctx, q, size, list); err != nil {
		return r, Errorf(KindInternal, "cannot rebuild version %d: %v", r.version, err).wrap(err)
	}
	if contentHash(r.content) != r.hash {
		return r, Errorf(KindInternal, "version %d's text does not match its stored hash", r.version)
	}
	return r, nil
}

func isNoSuchColumn(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such column")
}

// VersionText returns the text of one version (0 = the newest) as the room
// stores it, checked against its hash: for tools and tests that read a
// sidecar directly, since the text is no longer a column.
func VersionText(ctx context.Context, q Querier, version int64) (string, error) {
	r, err := readVersion(ctx, q, version)
	if errors.Is(err, sql.ErrNoRows) {
		return "", versionMissing(ctx, q, version)
	}
	if err != nil && AsError(err) == nil {
		return "", Internal(err)
	}
	return r.content, err
}

// chunkedVersionsSchema is the migration that moved the texts into chunks.
const chunkedVersionsSchema = 6

// migrationSteps are the parts of migrations that SQL cannot do, run in
// the migration's transaction right after its SQL.
var migrationSteps = map[int]func(context.Context, *sql.Conn) error{
	chunkedVersionsSchema: chunkVersions,
	chunkRefsSchema:       countChunkRefs,
}

// chunkVersions is migration 6's step: it stores the text of every version
// as chunks (oldest first, so later versions share the chunks of earlier
// ones), checks that each rebuilds to the same bytes, and drops the column
// that held the texts. One version's text is in memory at a time.
func chunkVersions(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `SELECT version FROM versions ORDER BY version`)
	if err != nil {
		return err
	}
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		vs = append(vs, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, v := range vs {
		var content string
		if err := conn.QueryRowContext(ctx, `SELECT content FROM versions WHERE version = ?`, v).Scan(&content); err != nil {
			return err
		}
		st, err := storeText(ctx, conn, content)
		if err != nil {
			return err
		}
		back, err := loadText(ctx, conn, st.size, st.chunk)
		if err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
		if back != content {
			return fmt.Errorf("version %d does not rebuild to its text", v)
		}
		if _, err := conn.ExecContext(ctx, `UPDATE versions SET size = ?, chunk_ids = ? WHERE version = ?`, st.size, st.chunk, v); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, `ALTER TABLE versions DROP COLUMN content`)
	return err
}
