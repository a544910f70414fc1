package crashtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ceBin is the `ce` binary TestMain built; set once before any test runs.
var ceBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run() // listing tests (scripts/fuzz.sh) needs no binary
	}
	dir, err := os.MkdirTemp("", "ce-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := buildCE(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest: building ce:", err)
		return 1
	}
	ceBin = bin
	return m.Run()
}

// buildCE runs `go build -o DIR/ce ./cmd/ce` from the module root (the
// parent of this package's directory).
func buildCE(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ce")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/ce")
	cmd.Dir = filepath.Dir(wd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
}

// envInt reads a positive integer from the environment, or def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// envSeconds reads a duration in seconds (a decimal number) from the environment, or def.
func envSeconds(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("%s=%q: want a positive number of seconds", name, v)
	}
	return time.Duration(f * float64(time.Second))
}

// childEnv is this process's environment without any CE_* variable, so the
// caller's shell (and this test's own knobs) cannot change what ce sees.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CE_") {
			env = append(env, kv)
		}
	}
	return env
}
