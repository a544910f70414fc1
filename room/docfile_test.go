package room

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Reading the document allocates its size once: io.ReadAll's doubling and
// the string conversion made it about 4.5 times (issue 17). A file that
// grows while it is read is read to its end (the fstat size is a hint).
func TestReadDoc_AllocatesTheTextOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.md")
	text := strings.Repeat("a line of the document.\n", (4<<20)/24)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	readDoc(path) // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, _, err := readDoc(path)
	runtime.ReadMemStats(&after)
	if err != nil || got != text {
		t.Fatalf("read %d bytes of %d: %v", len(got), len(text), err)
	}
	ratio := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(text))
	t.Logf("%.2f bytes allocated per byte read", ratio)
	if ratio > 1.2 {
		t.Errorf("reading the document allocated %.2f times its size, want about once", ratio)
	}

	t.Run("a file longer than its fstat size is read to its end", func(t *testing.T) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := os.WriteFile(path, []byte(text+text), 0o644); err != nil { // same inode, grown
			t.Fatal(err)
		}
		got, err := readAllAt(f)
		if err != nil || got != text+text {
			t.Fatalf("read %d bytes of %d: %v", len(got), 2*len(text), err)
		}
	})
}
