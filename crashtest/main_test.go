package crashtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

// ceBin is the `ce` binary TestMain built; set once before any test runs.
var ceBin string

func TestMain(m *testing.M) { os.Exit(cetest.Main(m, "crashtest", &ceBin)) }

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
