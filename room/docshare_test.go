package room_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestCurrentDoc_ConcurrentMissesShareOneParse: readers that find the
// parsed-version cache empty at the same moment get one shared *Doc, not a
// copy of a large document each (issue 13 item 7: thirty first reads of a
// 20 MB document at once were thirty parses).
func TestCurrentDoc_ConcurrentMissesShareOneParse(t *testing.T) {
	big := "# Big\n\n" + strings.Repeat("## Part\n\n"+strings.Repeat("lorem ipsum dolor sit amet\n", 40), 2000)
	e := newEnv(t, withDocText(big))
	ctx := context.Background()
	for round := range 3 {
		// A new engine on the same sidecar starts with an empty cache.
		eng, err := room.NewEngine(e.doc, room.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		const readers = 16
		docs := make([]*room.Doc, readers)
		errs := make([]error, readers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range readers {
			wg.Go(func() {
				<-start
				docs[i], errs[i] = eng.CurrentDoc(ctx, e.store.Reader)
			})
		}
		close(start)
		wg.Wait()
		for i := range readers {
			if errs[i] != nil {
				t.Fatalf("round %d reader %d: %v", round, i, errs[i])
			}
			if docs[i] != docs[0] {
				t.Fatalf("round %d: reader %d got its own parse of version %d; concurrent misses must share one", round, i, docs[i].Version)
			}
		}
		if docs[0].Content != big {
			t.Fatalf("round %d: the shared parse is not the document", round)
		}
	}
}
