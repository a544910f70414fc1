package room

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// FuzzVersionStore stores two texts (the second an edit of the first:
// a splice of fuzzed bytes at a fuzzed place) in a real sidecar and reads
// both back.
//
// Properties: both rebuild byte for byte, the second shares the first's
// chunks away from the splice (it stores no more new chunks than the edit
// and its two neighbouring cut points can touch), and a stored text's
// size is its length.
func FuzzVersionStore(f *testing.F) {
	f.Add([]byte("# Idea\n\nhello\n"), uint32(3), uint16(0), []byte("x"))
	f.Add(bytes.Repeat([]byte("line of prose, more or less.\n"), 5000), uint32(70000), uint16(2), []byte("\n## New\n"))
	f.Add(bytes.Repeat([]byte{0}, 200<<10), uint32(1<<16), uint16(9), []byte{})
	ctx := context.Background()
	st, err := OpenStore(ctx, filepath.Join(f.TempDir(), "fuzz.md.commonroom.db"), false)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	f.Fuzz(func(t *testing.T, base []byte, at uint32, cut uint16, insert []byte) {
		i := int(at) % (len(base) + 1)
		j := min(len(base), i+int(cut))
		edited := string(base[:i]) + string(insert) + string(base[j:])
		tx, err := st.Writer.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var chunks [2]int64
		for k, text := range []string{string(base), edited} {
			s, err := storeText(ctx, tx, text)
			if err != nil {
				t.Fatal(err)
			}
			if s.size != int64(len(text)) {
				t.Fatalf("size %d for %d bytes", s.size, len(text))
			}
			back, err := loadText(ctx, tx, s.size, s.chunk)
			if err != nil {
				t.Fatal(err)
			}
			if back != text {
				t.Fatalf("text %d did not rebuild: %d bytes back for %d", k, len(back), len(text))
			}
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM version_chunks`).Scan(&chunks[k]); err != nil {
				t.Fatal(err)
			}
		}
		// An edit touches the chunk it is in and may move the next cut
		// point; anything past a cut point that survives is shared.
		if grown, bound := chunks[1]-chunks[0], int64((len(insert)+int(cut))/chunkMin+4); grown > bound {
			t.Fatalf("an edit of %d bytes at %d stored %d new chunks (bound %d)", len(insert)+int(cut), i, grown, bound)
		}
	})
}
