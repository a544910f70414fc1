// Package cetest is what the programs that drive the real ce binary share
// (the cli and crash tests, and the bench): building it from this tree,
// giving its children an environment free of the caller's CE_* settings, and
// starting, waiting on and signalling a child (Proc), so process handling
// lives in one place.
package cetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Main is a TestMain body for packages that run the ce binary: it builds
// ./cmd/ce into a temporary directory, stores its path in *bin, runs the
// tests and removes the directory. Listing tests (scripts/fuzz.sh) builds
// nothing. name prefixes its error messages.
func Main(m interface{ Run() int }, name string, bin *string) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ce-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := BuildCE(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+": building ce:", err)
		return 1
	}
	*bin = b
	return m.Run()
}

// BuildCE runs `go build -o DIR/ce ./cmd/ce` in the module's root, so what
// runs is the code in this tree and not whatever ce is on PATH.
func BuildCE(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the ce module")
	}
	bin := filepath.Join(dir, "ce")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/ce")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/ce: %v\n%s", err, out)
	}
	return bin, nil
}

// ChildEnv is this process's environment without any CE_* variable (so a
// developer's settings cannot change what a test's ce child does), plus
// extra.
func ChildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
