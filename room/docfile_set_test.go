package room

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestGuardedFileKnowsNoEngine keeps the guarded file write one subsystem
// (docfile.go): none of its files may name Engine, so what it does can be
// read, and tested, without the engine, the sidecar or versions.
func TestGuardedFileKnowsNoEngine(t *testing.T) {
	for _, file := range []string{"docfile.go", "docswap.go", "docswap_linux.go", "docswap_other.go", "docowner.go"} {
		t.Run(file+"/names_no_Engine", func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Name == "Engine" {
					t.Errorf("%s names Engine: the guarded file write must not know the engine", file)
				}
				return true
			})
		})
	}
}
