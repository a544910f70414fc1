package transport

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// vendorWords are the names that may appear only under transport/<plugin>
// and in the program's main: the core is everything above the transport
// contract and stays vendor-neutral.
var vendorWords = regexp.MustCompile(`(?i)tailscale|tsnet|headscale`)

// coreDirs are the packages that must never name a vendor, relative to this
// package's directory.
var coreDirs = []string{"../room", "../actor", "../listen", "../httpapi"}

// TestVendorNamesStayOutOfTheCore fails if any file (Go source, tests,
// embedded page assets, test data) of the core packages names or imports a
// vendor, and if this package itself imports anything beyond the standard
// library.
func TestVendorNamesStayOutOfTheCore(t *testing.T) {
	t.Run("the core names no vendor", func(t *testing.T) {
		scanned := 0
		for _, dir := range coreDirs {
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == "node_modules" {
						return filepath.SkipDir
					}
					return nil
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				scanned++
				for i, line := range strings.Split(string(b), "\n") {
					if m := vendorWords.FindString(line); m != "" {
						t.Errorf("%s:%d names %q: vendor names belong in transport/<plugin> and main only", path, i+1, m)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if scanned < 100 {
			t.Fatalf("scanned only %d files: is the walk looking in the right place?", scanned)
		}
	})
	t.Run("the scan would see a vendor name", func(t *testing.T) {
		for _, s := range []string{`import "tailscale.com/tsnet"`, "// TailScale node", "HEADSCALE_URL"} {
			if !vendorWords.MatchString(s) {
				t.Errorf("%q not caught", s)
			}
		}
	})
	t.Run("the contract imports only the standard library", func(t *testing.T) {
		files, err := filepath.Glob("*.go")
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files: %v", err)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") || strings.HasPrefix(p, "github.com/commonroom/") {
					t.Errorf("%s imports %s: the transport contract takes only the standard library", f, p)
				}
			}
		}
	})
}
