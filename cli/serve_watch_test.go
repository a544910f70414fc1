package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeWatchesTheFile: `ce serve` turns the file watcher on, so an
// editor's save (a new file renamed over the document) becomes a version
// on a live event stream without any read asking the room to look. The
// stream is opened before the save and nothing else is sent until its
// frame arrives; the sweeper's first wake is 30 s after start, past the
// wait's bound, so only the watcher can explain the frame.
func TestServeWatchesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json")
	g := join(t, dir, s.Banner.Invite, "watcher")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.Banner.IngressURL+"/workspace/observe", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.SessionToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /workspace/observe: %d", res.StatusCode)
	}
	summaries := make(chan string, 64)
	go func() {
		defer close(summaries)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				Params struct {
					Type    string `json:"event_type"`
					Payload struct {
						Summary string `json:"summary"`
					} `json:"payload"`
				} `json:"params"`
			}
			if json.Unmarshal([]byte(data), &m) == nil && m.Params.Type == "change.committed" {
				summaries <- m.Params.Payload.Summary
			}
		}
	}()

	tmp := filepath.Join(dir, ".notes.md.swp")
	if err := os.WriteFile(tmp, []byte("# Notes\n\nsaved by an editor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case sum, ok := <-summaries:
			if !ok {
				t.Fatal("the event stream ended before the outside edit arrived")
			}
			if sum == "external substrate edit" {
				if st := status(t, dir, file); st.Status.Version != 2 {
					t.Fatalf("version %d after the outside edit, want 2", st.Status.Version)
				}
				return
			}
		case <-timeout:
			t.Fatal("no change.committed for the outside edit within 20s: ce serve does not watch the file")
		}
	}
}
