package roomtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
)

// Golden compares got with the file at path, or rewrites the file when
// update is set (each package's -update flag). A mismatch fails with a
// unified diff and the command that accepts the change, so a reviewer sees
// exactly what moved.
func Golden(t testing.TB, path string, got []byte, update bool, regenerate string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with %s)", err, regenerate)
	}
	if string(want) == string(got) {
		return
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(want)), B: difflib.SplitLines(string(got)),
		FromFile: path, ToFile: "this build", Context: 2,
	})
	t.Errorf("%s differs from this build; if the change is meant, accept it with %s\n%s", path, regenerate, strings.TrimSpace(diff))
}
