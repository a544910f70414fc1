package httpapi

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
)

// TestOutsideSaveReachesLiveStreams: an edit made in the user's editor
// reaches both kinds of live stream at the HTTP door, a subscriptions/listen
// subscribed to the document and the legacy GET /mcp after
// resources/subscribe, with the sweeper idle for an hour, the fallback poll
// too, and no request between the save and the frames (a read would sync):
// only the file watcher can explain them.
func TestOutsideSaveReachesLiveStreams(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Actor: func(c *actor.Config) {
		c.MaxSweepWait = time.Hour
		c.Watch = actor.WatchConfig{Enabled: true, Poll: time.Hour}
	}})
	c := streamClient()
	doc := h.Eng.DocumentURI()

	l := h.join("listener", "read")
	s, ack := h.Listen(t, c, l.SessionToken, `"watch"`, map[string]any{"resourceSubscriptions": []string{doc}}, false)
	if got := decodeStrings(t, ack["resourceSubscriptions"]); len(got) != 1 || got[0] != doc {
		t.Fatalf("listen acknowledged %v, want [%s]", got, doc)
	}
	g := h.join("legacy", "read")
	if res := newMCPClient(h, g.SessionToken, false).ok(t, "resources/subscribe", map[string]any{"uri": doc}); res["resultType"] != "complete" {
		t.Fatalf("resources/subscribe: %v", res)
	}
	legacy, refused := h.LegacyGet(t, c, g.SessionToken, "text/event-stream")
	if legacy == nil {
		t.Fatalf("GET /mcp refused: %d %s", refused.Status, refused.Raw)
	}
	legacy.Start()

	saves := []struct {
		name string
		save func(t *testing.T)
	}{
		{"an editor's save by rename", func(t *testing.T) {
			tmp := filepath.Join(filepath.Dir(h.Doc), ".idea.md.swp")
			if err := os.WriteFile(tmp, []byte(threeSections("saved by an editor", "ship it", "step one")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, h.Doc); err != nil {
				t.Fatal(err)
			}
		}},
		{"an append", func(t *testing.T) {
			f, err := os.OpenFile(h.Doc, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("appended by hand\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}},
	}
	for i, sv := range saves {
		t.Run(sv.name+" reaches both streams", func(t *testing.T) {
			sv.save(t)
			s.ExpectRes(t, doc)
			legacy.ExpectRes(t, doc)
			want, err := os.ReadFile(h.Doc)
			if err != nil {
				t.Fatal(err)
			}
			if v := h.StatusVersion(t, l.SessionToken); v != int64(i+2) {
				t.Fatalf("version %d after the save, want %d", v, i+2)
			}
			res := newMCPClient(h, l.SessionToken, false).ok(t, "resources/read", map[string]any{"uri": doc})
			contents, _ := res["contents"].([]any)
			if len(contents) != 1 {
				t.Fatalf("resources/read: %v", res)
			}
			if text, _ := contents[0].(map[string]any)["text"].(string); text != string(want) {
				t.Fatalf("the room reads %q, want the saved file %q", text, want)
			}
		})
	}
	if n := h.Room.Stats().Sweeps.Load(); n != 0 {
		t.Fatalf("%d sweeps ran; the sweeper was meant to be idle", n)
	}
}
