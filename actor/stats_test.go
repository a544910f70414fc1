package actor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cpuclock"
	"github.com/commonroom/ce/room"
)

// settle waits until the writer has finished the turn that answered the
// last command (it re-arms its sweeper after answering).
func settle(r *Room, before uint64) {
	for r.Stats().Turns.Load() <= before {
		runtime.Gosched()
	}
}

// The writer's cost counters are what the bench and the benchmarks divide
// by commands: each statement a command runs must be counted once, and the
// CPU its thread spends inside a command must be counted.
func TestWriterCountsItsStatementsAndCPU(t *testing.T) {
	tr := openRoom(t, func(c *Config) { c.CPUSampleEvery = 1 })
	ctx := context.Background()
	turn := func(fn func(tx *room.Tx) (struct{}, error)) (stmts, cpu uint64) {
		t.Helper()
		st := tr.Stats()
		turns, s0, c0 := st.Turns.Load(), st.Statements.Load(), st.CPUNanos.Load()
		if _, err := Do(ctx, tr.Room, "test", fn); err != nil {
			t.Fatal(err)
		}
		settle(tr.Room, turns)
		return st.Statements.Load() - s0, st.CPUNanos.Load() - c0
	}
	nothing := func(tx *room.Tx) (struct{}, error) { return struct{}{}, nil }
	turn(nothing) // the writer arms its sweeper once before its first turn
	empty, _ := turn(nothing)
	if empty == 0 {
		t.Fatalf("an empty command's turn counted no statements; BEGIN, SAVEPOINT and COMMIT at least are run")
	}
	three, _ := turn(func(tx *room.Tx) (struct{}, error) {
		for range 3 {
			if _, err := tx.Querier().ExecContext(tx.Context(), `SELECT 1`); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if three-empty != 3 {
		t.Errorf("a command running 3 statements counted %d more than an empty one, want 3", three-empty)
	}
	if runtime.GOOS != "linux" {
		return // no thread CPU clock: the counter stays at zero
	}
	const spin = 5 * time.Millisecond
	_, cpu := turn(func(tx *room.Tx) (struct{}, error) {
		// The command runs on the writer's thread: spin until that
		// thread's own clock shows the CPU spent.
		start, _ := cpuclock.Thread()
		for now, _ := cpuclock.Thread(); now-start < int64(spin); now, _ = cpuclock.Thread() {
		}
		return struct{}{}, nil
	})
	if time.Duration(cpu) < spin {
		t.Errorf("a command that spent %v of its thread's CPU was counted as %v", spin, time.Duration(cpu))
	}
}

// Measuring a turn pins the writer to its thread, which costs throughput
// when every turn pays it; by default one turn in CPUSampleEvery is
// measured and CPUSeconds scales the measured CPU to all turns.
func TestWriterMeasuresOneTurnInCPUSampleEvery(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no thread CPU clock off Linux: nothing is measured")
	}
	tr := openRoom(t, func(c *Config) { c.CPUSampleEvery = 4 })
	ctx := context.Background()
	nothing := func(tx *room.Tx) (struct{}, error) { return struct{}{}, nil }
	for range 12 {
		st := tr.Stats()
		turns := st.Turns.Load()
		if _, err := Do(ctx, tr.Room, "test", nothing); err != nil {
			t.Fatal(err)
		}
		settle(tr.Room, turns)
	}
	st := tr.Stats()
	turns, measured := st.Turns.Load(), st.CPUTurns.Load()
	if want := (turns + 3) / 4; measured != want {
		t.Errorf("measured %d of %d turns, want one in 4 (%d)", measured, turns, want)
	}
	want := float64(st.CPUNanos.Load()) / 1e9 * float64(turns) / float64(measured)
	if got := st.CPUSeconds(); got != want || got <= 0 {
		t.Errorf("CPUSeconds = %v, want the measured CPU scaled to every turn (%v)", got, want)
	}
}
