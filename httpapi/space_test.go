package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// leaveFreePages writes rows into a table of the test's own through the
// room's writer and deletes most of them, so the sidecar holds free pages
// (about n) spread over its file.
func leaveFreePages(t *testing.T, h *roomHarness, n int) {
	t.Helper()
	for _, stmts := range [][]string{
		{`CREATE TABLE IF NOT EXISTS filler(id INTEGER PRIMARY KEY, b BLOB)`,
			`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < ?) INSERT INTO filler(b) SELECT randomblob(3000) FROM k`},
		{`DELETE FROM filler WHERE id % 2 = 0 OR id < (SELECT max(id) FROM filler) / 2`},
	} {
		_, err := actor.Do(context.Background(), h.Room, "test", func(tx *room.Tx) (struct{}, error) {
			for _, s := range stmts {
				var args []any
				if strings.Contains(s, "?") {
					args = []any{n * 4 / 3}
				}
				if _, err := tx.Querier().ExecContext(tx.Context(), s, args...); err != nil {
					return struct{}{}, err
				}
			}
			return struct{}{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// /debug/metrics carries the sidecar's size (issue 26 item 5): its files,
// SQLite's pages, its auto-vacuum mode, what retention removed, and the
// free pages given back and the longest step that took.
func TestMetricsShowTheSidecarsSpace(t *testing.T) {
	h := newHarness(t, "")
	get := func() map[string]any {
		t.Helper()
		r := h.Do(t, "GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
		wantOK(t, r)
		return r.JSON(t)
	}
	m := get()
	st, _ := m["storage"].(map[string]any)
	requireMembers(t, "storage", st, "bytes", "db_bytes", "wal_bytes", "page_size", "page_count", "free_pages", "auto_vacuum", "pruned")
	if st["auto_vacuum"] != "incremental" || num(st["page_size"]) != 4096 || num(st["db_bytes"]) <= 0 ||
		num(st["bytes"]) != num(st["db_bytes"])+num(st["wal_bytes"]) || num(st["page_count"]) <= 0 {
		t.Errorf("storage = %v", st)
	}
	if p, ok := st["pruned"].(map[string]any); !ok || len(p) != 0 {
		t.Errorf("pruned = %v, want {} with no retention", st["pruned"])
	}
	vac, _ := m["vacuum"].(map[string]any)
	requireMembers(t, "vacuum", vac, "steps", "pages", "failed", "longest_step_ms")

	leaveFreePages(t, h, 300)
	m = get()
	st, _ = m["storage"].(map[string]any)
	if num(st["free_pages"]) < 200 {
		t.Errorf("free_pages = %v after deleting ~300 pages of rows", st["free_pages"])
	}
	wantOK(t, h.Do(t, "POST", h.OwnerURL("/owner/compact"), h.OpToken, nil))
	m = get()
	vac, _ = m["vacuum"].(map[string]any)
	if num(vac["steps"]) == 0 || num(vac["pages"]) < 200 || vac["longest_step_ms"].(float64) <= 0 {
		t.Errorf("vacuum = %v after a compaction", vac)
	}
}

func requireMembers(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s has no %q: %v", what, k, m)
		}
	}
}

// POST /owner/compact gives the room's free pages back through its writer
// and answers the sizes before and after; it is the operator's alone, and
// a bad body changes nothing.
func TestOwnerCompact(t *testing.T) {
	h := newHarness(t, "")
	guest := h.join("guest", "read", "admin")
	leaveFreePages(t, h, 300)
	free := func() int64 {
		sp, err := h.Room.Space(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sp.FreePages
	}
	before := free()

	for _, tc := range []struct {
		name   string
		url    string
		token  string
		body   any
		status int
		code   string
	}{
		{"malformed JSON is 400", h.OwnerURL("/owner/compact"), h.OpToken, `{"budget_ms":`, 400, "invalid_request"},
		{"a budget of the wrong type is 400", h.OwnerURL("/owner/compact"), h.OpToken, map[string]any{"budget_ms": "soon"}, 400, "invalid_request"},
		{"a negative budget is 400", h.OwnerURL("/owner/compact"), h.OpToken, map[string]any{"budget_ms": -1}, 400, "invalid_request"},
		{"a budget past the write timeout is 400", h.OwnerURL("/owner/compact"), h.OpToken, map[string]any{"budget_ms": 20001}, 400, "invalid_request"},
		{"a JSON array is 400", h.OwnerURL("/owner/compact"), h.OpToken, `[]`, 400, "invalid_request"},
		{"an oversize body is 413", h.OwnerURL("/owner/compact"), h.OpToken, `{"x":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "limit_exceeded"},
		{"no credential is 401", h.OwnerURL("/owner/compact"), "", nil, 401, "unauthorized"},
		{"a session, even an admin's, is 403", h.OwnerURL("/owner/compact"), guest.SessionToken, nil, 403, "permission_denied"},
		{"the ingress has no such route", h.IngressURL("/owner/compact"), guest.SessionToken, nil, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.Do(t, "POST", tc.url, tc.token, tc.body), tc.status, tc.code)
			if got := free(); got != before {
				t.Errorf("free pages %d → %d after a refused compaction", before, got)
			}
		})
	}

	t.Run("the operator's compaction gives every free page back", func(t *testing.T) {
		r := h.Do(t, "POST", h.OwnerURL("/owner/compact"), h.OpToken, map[string]any{"budget_ms": 20000})
		wantOK(t, r)
		var a CompactAnswer
		r.Into(t, &a)
		if !a.Done || a.Steps == 0 || a.PagesFreed < before*9/10 || a.Before.FreePages < before*9/10 || a.After.FreePages != 0 {
			t.Errorf("answer %+v; %d pages were free", a, before)
		}
		// The rows were still in the WAL: the database file may have grown
		// to take them in, but the sidecar as a whole shrank, and its file
		// is exactly its pages once the WAL is emptied.
		if !a.Checkpointed || a.After.Bytes >= a.Before.Bytes || a.After.WALBytes != 0 || a.After.DBBytes != a.After.PageCount*a.After.PageSize {
			t.Errorf("sizes %d → %d bytes (db %d → %d), checkpointed %v", a.Before.Bytes, a.After.Bytes, a.Before.DBBytes, a.After.DBBytes, a.Checkpointed)
		}
		if free() != 0 {
			t.Errorf("%d free pages after the compaction", free())
		}
	})
	t.Run("a compaction with nothing to do is done at once", func(t *testing.T) {
		r := h.Do(t, "POST", h.OwnerURL("/owner/compact"), h.OpToken, nil)
		wantOK(t, r)
		var a CompactAnswer
		r.Into(t, &a)
		if !a.Done || a.PagesFreed != 0 || a.Before.FreePages != 0 {
			t.Errorf("answer %+v", a)
		}
	})
}

// The owner page shows the room's size on disk: the view it renders from
// (GET /workspace/room) carries the sidecar's files for an admin only, and
// the page's header says it.
func TestOwnerPageShowsTheRoomsSize(t *testing.T) {
	h := newHarness(t, "")
	reader := h.join("reader", "read")
	var view struct {
		Sidecar *room.SidecarSize `json:"sidecar"`
	}
	r := h.Do(t, "GET", h.OwnerURL("/workspace/room"), h.OpToken, nil)
	wantOK(t, r)
	r.Into(t, &view)
	if view.Sidecar == nil || view.Sidecar.DBBytes <= 0 || view.Sidecar.Bytes != view.Sidecar.DBBytes+view.Sidecar.WALBytes {
		t.Errorf("the operator's room view: sidecar %+v", view.Sidecar)
	}
	view.Sidecar = nil
	r = h.Do(t, "GET", h.IngressURL("/workspace/room"), reader.SessionToken, nil)
	wantOK(t, r)
	r.Into(t, &view)
	if view.Sidecar != nil {
		t.Errorf("a reader's room view carries the sidecar's size: %+v", view.Sidecar)
	}
	_, cookie := h.pageCookie(t)
	page := h.Do(t, "GET", h.OwnerURL("/"), "", nil, withCookie(cookie))
	if page.Status != http.StatusOK || !strings.Contains(string(page.Body), `<span id="size"`) || !strings.Contains(string(page.Body), "on disk</span>") {
		t.Errorf("the owner page's header has no size: %d\n%s", page.Status, page.Body)
	}
}
