//go:build !race

package crashtest

// raceEnabled: the test binary runs under the race detector, which makes the
// clients (and the read-only SQLite checks) several times slower.
const raceEnabled = false
