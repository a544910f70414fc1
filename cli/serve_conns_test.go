package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFitConnCaps(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		limit                uint64
		ingress, owner       int
		wantIngress, wantOwn int
	}{
		{"an unknown limit keeps the caps", 0, 4096, 256, 4096, 256},
		{"caps under the limit are kept", 20000, 4096, 256, 4096, 256},
		{"caps that just fit are kept", 4096 + 256 + fdReserve, 4096, 256, 4096, 256},
		{"a low limit lowers the ingress, the owner keeps its cap", 4096, 4096, 256, 4096 - fdReserve - 256, 256},
		{"a very low limit lowers both", 1024, 4096, 256, 1024 - fdReserve - 96, 96},
		{"a limit below the reserve still leaves one each", 100, 4096, 256, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, own := fitConnCaps(tc.limit, tc.ingress, tc.owner)
			if in != tc.wantIngress || own != tc.wantOwn {
				t.Fatalf("fitConnCaps(%d, %d, %d) = %d, %d; want %d, %d", tc.limit, tc.ingress, tc.owner, in, own, tc.wantIngress, tc.wantOwn)
			}
			if tc.limit > fdReserve+2 && uint64(in+own+fdReserve) > tc.limit {
				t.Fatalf("%d + %d + %d descriptors exceed the limit %d", in, own, fdReserve, tc.limit)
			}
		})
	}
}

// TestServeConnFlags: the connection caps and timeouts are ce serve flags;
// nonsense is refused before anything is created, and a cap given is the
// cap enforced.
func TestServeConnFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--max-conns", "0"}, {"--owner-max-conns", "-1"}, {"--write-timeout", "0s"}, {"--body-timeout", "-1s"},
	} {
		t.Run(strings.Join(args, "_")+"_is_a_usage_error", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := ceWithin(t, fileTimeout, dir, nil, append([]string{"serve", "notes.md", "--json"}, args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
			}
			if exists(filepath.Join(dir, "notes.md.commonroom.db")) {
				t.Error("a refused serve created a sidecar")
			}
		})
	}
	t.Run("--max-conns_2_a_third_ingress_connection_takes_the_oldest_idle_one_and_the_owner_answers", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startServe(t, dir, "serve", "notes.md", "--json", "--max-conns", "2")
		addr := strings.TrimPrefix(s.Banner.IngressURL, "http://")
		get := func(c net.Conn, br *bufio.Reader) (int, error) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(runTimeout))
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				return 0, err
			}
			res.Body.Close()
			return res.StatusCode, nil
		}
		var held []net.Conn
		var readers []*bufio.Reader
		for i := range 3 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if code, err := get(c, br); err != nil || code != 200 {
				t.Fatalf("connection %d: %v %v", i, err, code)
			}
			held, readers = append(held, c), append(readers, br)
		}
		// The first, idle and unauthenticated, made room for the third.
		held[0].SetReadDeadline(time.Now().Add(runTimeout))
		if _, err := readers[0].ReadByte(); err == nil {
			t.Fatal("the oldest idle connection got bytes instead of being closed")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the oldest idle connection was left open")
		}
		owner, _, _ := strings.Cut(s.Banner.OwnerURL, "/?")
		wantHealthy(t, owner)

		var oc struct {
			Token string `json:"operator_token"`
		}
		b, err := os.ReadFile(ownerOf(filepath.Join(dir, "notes.md")))
		if err != nil || json.Unmarshal(b, &oc) != nil {
			t.Fatalf("operator credential: %v", err)
		}
		code, body := httpDo(t, "GET", owner+"/debug/metrics", oc.Token, nil)
		var m struct {
			Connections map[string]struct {
				Max         int            `json:"max"`
				Refused     int            `json:"refused"`
				ReclaimedBy map[string]int `json:"reclaimed_by"`
			} `json:"connections"`
		}
		if code != 200 || json.Unmarshal(body, &m) != nil {
			t.Fatalf("metrics %d %s", code, body)
		}
		if in := m.Connections["ingress"]; in.Max != 2 || in.Refused != 0 || in.ReclaimedBy["cap_unauthenticated_idle"] != 1 {
			t.Errorf("connections.ingress = %+v, want max 2, no refusal, one unauthenticated idle connection reclaimed", in)
		}
	})
}
