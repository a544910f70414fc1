package room_test

import (
	"maps"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestParticipantNames: names for the ids asked, a participant who left
// included (a handoff outlives its parties); unknown and empty ids are left
// out; a caller without read is refused.
func TestParticipantNames(t *testing.T) {
	e := newEnv(t)
	planner := e.join("planner", agent()...)
	writer := e.join("writer", agent()...)
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.Ack, error) { return eng.Leave(tx, writer, room.Empty{}) }); err != nil {
		t.Fatal(err)
	}
	t.Run("known_ids_named_left_ones_too", func(t *testing.T) {
		got, err := read(e, func(eng *room.Engine, q room.Querier) (map[string]string, error) {
			return eng.ParticipantNames(t.Context(), q, e.op(), []string{planner.ParticipantID, writer.ParticipantID, planner.ParticipantID, "", "participant_0000000000000000"})
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{planner.ParticipantID: "planner", writer.ParticipantID: "writer"}
		if !maps.Equal(got, want) {
			t.Fatalf("names = %v, want %v", got, want)
		}
	})
	t.Run("none_asked_none_named", func(t *testing.T) {
		got, err := read(e, func(eng *room.Engine, q room.Querier) (map[string]string, error) {
			return eng.ParticipantNames(t.Context(), q, e.op(), nil)
		})
		if err != nil || len(got) != 0 {
			t.Fatalf("names = %v, %v", got, err)
		}
	})
	t.Run("without_read_refused", func(t *testing.T) {
		_, err := read(e, func(eng *room.Engine, q room.Querier) (map[string]string, error) {
			return eng.ParticipantNames(t.Context(), q, room.Principal{ParticipantID: planner.ParticipantID}, []string{planner.ParticipantID})
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}
