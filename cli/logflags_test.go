package cli

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// TestLogFormatUnknown: every command that makes a logger refuses a
// --log-format it does not know as a usage error (exit 2) naming the
// choices, before it does anything (ce serve creates no sidecar).
func TestLogFormatUnknown(t *testing.T) {
	dir := t.TempDir()
	newDoc(t, dir, "idea.md")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "idea.md", "--log-format", "xml"}},
		{"call", []string{"call", "GET", "/workspace/status", "--url", "http://127.0.0.1:1", "--session", "ses_x", "--log-format", "logfmt"}},
		{"join", []string{"join", "commonroom://join/nothing", "--log-format", "JSON"}},
		{"mcp", []string{"mcp", "commonroom://join/nothing", "--log-format", ""}},
	} {
		t.Run(c.name+" exits 2 naming text and json", func(t *testing.T) {
			r := ce(t, dir, nil, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, "--log-format") || !strings.Contains(r.stderr, "text or json") {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming --log-format's choices", r.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	if exists(sidecarOf(filepath.Join(dir, "idea.md"))) {
		t.Errorf("ce serve with a bad --log-format created the sidecar")
	}
}

// TestLogFormatTextIsTheDefault: without --log-format ce serve logs slog's
// key=value text lines.
func TestLogFormatTextIsTheDefault(t *testing.T) {
	dir := t.TempDir()
	newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json")
	wantHealthy(t, s.Banner.IngressURL)
	s.stop(syscall.SIGINT)
	log := s.stderr.String()
	if !strings.Contains(log, "level=INFO msg=serving") || strings.HasPrefix(strings.TrimSpace(log), "{") {
		t.Fatalf("ce serve's default log is not text:\n%s", log)
	}
}

// jsonLines parses a log line by line: every line must be one JSON object.
func jsonLines(t *testing.T, what, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: a log line is not JSON (%v): %s\nthe whole log:\n%s", what, err, sc.Bytes(), log)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		t.Fatalf("%s: the log is empty", what)
	}
	return out
}

// TestLogFormatJSON: ce serve with log-format json (from its config file)
// writes a log that parses line by line, and the lines of an agent's
// requests carry the trace ids it sent — as a traceparent header, and as
// _meta.traceparent through ce mcp, whose own JSON log stays on stderr
// (stdout holds JSON-RPC only). No line holds a secret or the document.
func TestLogFormatJSON(t *testing.T) {
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	conf := filepath.Join(dir, "serve.conf")
	if err := os.WriteFile(conf, []byte("log-format json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "idea.md", "--json", "--config", conf)
	owner, err := readOwnerFile(file)
	if err != nil {
		t.Fatal(err)
	}
	inv := inviteOnce(t, dir, file)
	g := join(t, dir, inv, "tracer")

	const (
		headerTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		metaTrace   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	req, _ := http.NewRequest("GET", s.Banner.IngressURL+"/workspace/status", nil)
	req.Header.Set("Authorization", "Bearer "+g.SessionToken)
	req.Header.Set("Traceparent", headerTrace)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /workspace/status: %d", res.StatusCode)
	}
	statusID := res.Header.Get("X-Request-Id")

	bridgeInv := inviteOnce(t, dir, file)
	cfg := t.TempDir()
	b := startBridge(t, dir, bridgeInv, "", []string{"XDG_CONFIG_HOME=" + cfg}, "--log-format", "json")
	meta := mcptest.Meta(mcptest.Version, mcptest.Caps(false), "ce-mcp-tests")
	meta["traceparent"] = metaTrace
	line, _ := mcptest.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "workspace_status", "arguments": map[string]any{}, "_meta": meta}})
	b.send(string(line))
	if l := b.answerTo("1", nil); l.Error != nil || l.Result == nil || l.Result["isError"] != false {
		t.Fatalf("workspace_status through ce mcp: %s", l.raw)
	}
	if code := b.closeAndWait(); code != 0 {
		t.Fatalf("ce mcp exited %d", code)
	}
	jsonLines(t, "ce mcp's stderr", b.Stderr.String())
	for _, l := range strings.Split(strings.TrimSpace(b.Stdout.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["jsonrpc"] != "2.0" {
			t.Errorf("ce mcp's stdout holds a line that is not JSON-RPC: %s", l)
		}
	}
	bridgeState := readState(t, filepath.Join(cfg, "commonroom", "sessions", s.Banner.WorkspaceID+".json"))

	s.stop(syscall.SIGINT)
	log := s.stderr.String()
	var sawHeader, sawMeta bool
	for _, l := range jsonLines(t, "ce serve's stderr", log) {
		if l["msg"] != "request" {
			continue
		}
		switch l["trace_id"] {
		case headerTrace[3:35]:
			sawHeader = true
			if l["request_id"] != statusID || l["route"] != "/workspace/status" || l["participant_id"] != g.ParticipantID || l["level"] != "INFO" {
				t.Errorf("the header's trace is on the wrong line: %v", l)
			}
		case metaTrace[3:35]:
			sawMeta = true
			if l["route"] != "/mcp" || l["rpc_method"] != "tools/call" || l["tool"] != "workspace_status" || l["participant_id"] != bridgeState.ParticipantID {
				t.Errorf("_meta's trace is on the wrong line: %v", l)
			}
		}
	}
	if !sawHeader || !sawMeta {
		t.Errorf("trace ids in the log: header %v, _meta %v; want both:\n%s", sawHeader, sawMeta, log)
	}
	secrets := map[string]string{"the operator credential": owner.OperatorToken, "the session": g.SessionToken,
		"the bridge's session": bridgeState.SessionToken, "an invitation": inv, "the bridge's invitation": bridgeInv,
		"the document": "step one"}
	for what, text := range map[string]string{"ce serve's log": log, "ce mcp's log": b.Stderr.String()} {
		for label, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %s", what, label)
			}
		}
	}
}
