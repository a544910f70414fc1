//go:build race

package room_test

// raceEnabled: the test binary runs under the race detector, which makes
// the writer several times slower (the outside-edit runs make fewer commits).
const raceEnabled = true
