package room_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/commonroom/ce/room"
)

// BenchmarkVacuumStep is one idle step of the writer (actor/vacuum.go):
// PRAGMA incremental_vacuum(N) on a sidecar whose free pages lie all over
// the file, with the writer's pragmas (WAL, synchronous=FULL: each step
// commits and syncs the WAL). Its time is how long a command that arrives
// during a step may wait; it chose the default of 32 pages.
func BenchmarkVacuumStep(b *testing.B) {
	for _, pages := range []int{16, 32, 64, 256} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			ctx := context.Background()
			st, err := room.OpenStore(ctx, filepath.Join(b.TempDir(), "idea.md.commonroom.db"), false)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			conn, err := st.Writer.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			refill := func() {
				for _, q := range []string{
					`CREATE TABLE IF NOT EXISTS filler(id INTEGER PRIMARY KEY, b BLOB)`,
					`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < 8000) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`,
					`DELETE FROM filler WHERE id % 2 = 0 OR id < (SELECT max(id) FROM filler) / 2`,
					`PRAGMA wal_checkpoint(TRUNCATE)`,
				} {
					if _, err := conn.ExecContext(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
			}
			refill()
			var freed int64
			for b.Loop() {
				before, after, err := room.VacuumStep(ctx, conn, pages)
				if err != nil {
					b.Fatal(err)
				}
				freed += before - after
				if after < int64(pages) {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(freed)/float64(b.N), "pages/op")
		})
	}
}
