package room

import (
	"reflect"
	"testing"
)

// TestPruneCountsByKind: Storage.Pruned names every kind PruneCounts has,
// by its JSON name, and leaves out the kinds with nothing removed.
func TestPruneCountsByKind(t *testing.T) {
	if got := (PruneCounts{}).byKind(); len(got) != 0 {
		t.Fatalf("nothing pruned: %v, want an empty map", got)
	}
	var c PruneCounts
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(int64(i + 1))
	}
	got := c.byKind()
	if len(got) != v.NumField() {
		t.Fatalf("every kind set: %d names %v, want %d", len(got), got, v.NumField())
	}
	if got["handoffs"] != c.Handoffs || got["tombstones"] != c.Tombstones {
		t.Fatalf("by kind %v, want handoffs %d and tombstones %d", got, c.Handoffs, c.Tombstones)
	}
	c = PruneCounts{Versions: 3}
	if got := c.byKind(); len(got) != 1 || got["versions"] != 3 {
		t.Fatalf("only versions pruned: %v", got)
	}
}
