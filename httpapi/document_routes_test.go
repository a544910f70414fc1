package httpapi

// End-to-end tests of the document's front doors (ARCHITECTURE.md §2 and
// D24): leases, proposals, review and commit over HTTP, the same round
// trip over MCP tools, the remaining reads, every refusal with its code and
// no row changed, and notifications/resources/updated after a commit. A real
// room (file and SQLite sidecar in t.TempDir()) behind real listeners on
// 127.0.0.1:0; time is the harness's fake clock plus Sweep.

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDocumentLeases(t *testing.T) {
	d := newCastRoom(t)
	h := d.h

	var leaseID string
	t.Run("Goals, section:Goals and Idea/Goals are one lease on the canonical path", func(t *testing.T) {
		first := h.checkout(t, d.author.SessionToken, "Goals")
		leaseID = str(first["lease_id"])
		if !strings.HasPrefix(leaseID, "lease_") {
			t.Fatalf("lease_id = %v", first["lease_id"])
		}
		if first["target"] != "Idea/Goals" || first["requested_target"] != "Goals" || first["participant_id"] != d.author.ParticipantID {
			t.Errorf("lease = %v, want target Idea/Goals requested as Goals by %s", first, d.author.ParticipantID)
		}
		if first["expires_at"] != wire(h.Clock.Now().Add(15*time.Minute)) {
			t.Errorf("expires_at = %v, want now + 15 min (the default)", first["expires_at"])
		}
		for _, spelling := range []string{"section:Goals", "Idea/Goals", "section:Idea/Goals"} {
			h.Clock.Advance(time.Minute)
			again := okJSON(t, h.post(t, d.author.SessionToken, "/workspace/checkout", map[string]any{"target": spelling, "minutes": 20}))
			if again["lease_id"] != leaseID || again["target"] != "Idea/Goals" {
				t.Errorf("checkout %q by the holder = %v, want the same lease %s renewed", spelling, again, leaseID)
			}
			if again["expires_at"] != wire(h.Clock.Now().Add(20*time.Minute)) {
				t.Errorf("checkout %q: expires_at = %v, want now + 20 min", spelling, again["expires_at"])
			}
		}
		if n := h.Count(`SELECT count(*) FROM leases WHERE released_at IS NULL`); n != 1 {
			t.Errorf("%d live lease rows, want 1", n)
		}
		if n := len(h.Events("lease.acquired")); n != 4 {
			t.Errorf("%d lease.acquired events, want 4 (acquire + 3 renewals)", n)
		}
	})
	if leaseID == "" {
		t.Fatal("no lease to go on with")
	}

	t.Run("another participant gets 409 lease_conflict with lease_id and region", func(t *testing.T) {
		for _, target := range []string{"Goals", "section:Goals", "Idea/Goals", "Idea", "workspace", "*"} {
			t.Run(target, func(t *testing.T) {
				before := h.Snapshot()
				m := wantError(t, h.post(t, d.other.SessionToken, "/workspace/checkout", map[string]any{"target": target}), http.StatusConflict, "lease_conflict")
				if m["lease_id"] != leaseID || m["region"] != "Idea/Goals" {
					t.Errorf("lease_id, region = %v, %v; want %s, Idea/Goals", m["lease_id"], m["region"], leaseID)
				}
				h.AssertUnchanged(t, before)
			})
		}
	})

	t.Run("a sibling section is free", func(t *testing.T) {
		l := h.checkout(t, d.other.SessionToken, "Plan")
		if l["target"] != "Idea/Plan" {
			t.Errorf("target = %v", l["target"])
		}
		wantOK(t, h.post(t, d.other.SessionToken, "/workspace/release", map[string]any{"lease_id": l["lease_id"]}))
	})

	t.Run("the holder renews; the expiry is capped at 120 minutes from acquisition", func(t *testing.T) {
		acquired := h.Clock.Now().Add(-3 * time.Minute) // the first checkout above
		r := okJSON(t, h.post(t, d.author.SessionToken, "/workspace/renew", map[string]any{"lease_id": leaseID, "minutes": 120}))
		if r["lease_id"] != leaseID || r["expires_at"] != wire(acquired.Add(120*time.Minute)) {
			t.Errorf("renew = %v, want expires_at %s", r, wire(acquired.Add(120*time.Minute)))
		}
		before := h.Snapshot()
		wantError(t, h.post(t, d.author.SessionToken, "/workspace/renew", map[string]any{"lease_id": leaseID, "minutes": 5}),
			http.StatusTooManyRequests, "limit_exceeded")
		h.AssertUnchanged(t, before)
	})

	t.Run("renew by someone else is 403 permission_denied and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		wantError(t, h.post(t, d.other.SessionToken, "/workspace/renew", map[string]any{"lease_id": leaseID}), http.StatusForbidden, "permission_denied")
		h.AssertUnchanged(t, before)
	})

	t.Run("release by someone else without admin is 403 permission_denied", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.post(t, d.other.SessionToken, "/workspace/release", map[string]any{"lease_id": leaseID}), http.StatusForbidden, "permission_denied")
		if m["lease_id"] != leaseID {
			t.Errorf("lease_id = %v", m["lease_id"])
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("the holder releases: ok, gone from the list, and again is a no-op", func(t *testing.T) {
		r := okJSON(t, h.post(t, d.author.SessionToken, "/workspace/release", map[string]any{"lease_id": leaseID}))
		if !reflect.DeepEqual(r, map[string]any{"status": "ok"}) {
			t.Errorf("release = %v, want {status: ok}", r)
		}
		if ls := okList(t, h.get(t, d.reader.SessionToken, "/workspace/leases")); len(ls) != 0 {
			t.Errorf("leases after release = %v", ls)
		}
		evs := h.Events("lease.released")
		if len(evs) == 0 || evs[len(evs)-1].Payload["lease_id"] != leaseID || evs[len(evs)-1].Payload["reason"] != "released" {
			t.Errorf("lease.released events = %v", evs)
		}
		before := h.Snapshot()
		wantOK(t, h.post(t, d.author.SessionToken, "/workspace/release", map[string]any{"lease_id": leaseID}))
		h.AssertUnchanged(t, before)
	})

	t.Run("renew of a released lease is 409 lease_conflict and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.post(t, d.author.SessionToken, "/workspace/renew", map[string]any{"lease_id": leaseID}), http.StatusConflict, "lease_conflict")
		if m["lease_id"] != leaseID {
			t.Errorf("lease_id = %v", m["lease_id"])
		}
		h.AssertUnchanged(t, before)
	})

	for _, tc := range []struct {
		name  string
		owner bool // the operator on the owner listener; else an admin session
	}{
		{name: "the operator releases another participant's lease", owner: true},
		{name: "an admin session releases another participant's lease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := h.checkout(t, d.other.SessionToken, "Goals")
			var r apiResp
			if tc.owner {
				r = h.operator(t, "/workspace/release", map[string]any{"lease_id": l["lease_id"]})
			} else {
				admin := h.join("admin", "read", "admin")
				r = h.post(t, admin.SessionToken, "/workspace/release", map[string]any{"lease_id": l["lease_id"]})
			}
			wantOK(t, r)
			evs := h.Events("lease.released")
			last := evs[len(evs)-1]
			if last.Payload["lease_id"] != l["lease_id"] || last.Payload["reason"] != "admin" {
				t.Errorf("last lease.released = %v, want reason admin for %v", last.Payload, l["lease_id"])
			}
			if n := h.Count(`SELECT count(*) FROM leases WHERE released_at IS NULL`); n != 0 {
				t.Errorf("%d live leases after the release", n)
			}
		})
	}

	t.Run("an expired lease no longer conflicts once swept", func(t *testing.T) {
		l := h.checkout(t, d.author.SessionToken, "Plan")
		h.Clock.Advance(16 * time.Minute)
		h.Sweep()
		evs := h.Events("lease.expired")
		if len(evs) == 0 || evs[len(evs)-1].Payload["lease_id"] != l["lease_id"] {
			t.Fatalf("lease.expired events = %v, want one for %v", evs, l["lease_id"])
		}
		if ls := okList(t, h.get(t, d.reader.SessionToken, "/workspace/leases")); len(ls) != 0 {
			t.Errorf("leases after expiry = %v", ls)
		}
		got := h.checkout(t, d.other.SessionToken, "Plan")
		if got["lease_id"] == l["lease_id"] || got["participant_id"] != d.other.ParticipantID {
			t.Errorf("checkout after expiry = %v", got)
		}
	})

	t.Run("checkout without the checkout capability is 403", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.post(t, d.reader.SessionToken, "/workspace/checkout", map[string]any{"target": "Goals"}), http.StatusForbidden, "permission_denied")
		if m["required"] != "checkout" {
			t.Errorf("required = %v", m["required"])
		}
		h.AssertUnchanged(t, before)
	})
}

func TestDocumentProposeReviewCommit(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	newGoals := "## Goals\n\nship it this week\n\n"
	want := strings.Replace(harnessDoc, regionGoals, newGoals, 1)

	var pid string
	t.Run("propose against the current version says base_is_current true", func(t *testing.T) {
		p := h.propose(t, d.author.SessionToken, 1, "Goals", newGoals)
		pid = str(p["proposal_id"])
		if !strings.HasPrefix(pid, "proposal_") || p["status"] != "pending" || p["base_is_current"] != true {
			t.Fatalf("propose = %v", p)
		}
		if p["target"] != "Idea/Goals" || jsonAt(p, "change", "section") != "Idea/Goals" || jsonAt(p, "change", "content") != newGoals {
			t.Errorf("target/change not canonical: %v", p)
		}
		if p["participant_id"] != d.author.ParticipantID || p["workspace_id"] != h.Eng.WorkspaceID || num(p["base_version"]) != 1 {
			t.Errorf("propose = %v", p)
		}
		evs := h.Events("proposal.created")
		if len(evs) != 1 || evs[0].Payload["proposal_id"] != pid {
			t.Errorf("proposal.created events = %v", evs)
		}
		if strings.Contains(evs[0].Raw, "this week") {
			t.Errorf("proposal.created carries the change body: %s", evs[0].Raw)
		}
		if h.fileText(t) != harnessDoc {
			t.Errorf("propose changed the file")
		}
	})
	if pid == "" {
		t.Fatal("no proposal to go on with")
	}

	t.Run("review without approve is 403 and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.post(t, d.author.SessionToken, "/workspace/proposal/review", map[string]any{"proposal_id": pid, "approve": true}),
			http.StatusForbidden, "permission_denied")
		if m["required"] != "approve" {
			t.Errorf("required = %v", m["required"])
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("review with approve moves it to approved", func(t *testing.T) {
		r := h.review(t, d.reviewer.SessionToken, pid, true)
		if !reflect.DeepEqual(r, map[string]any{"proposal_id": pid, "reviewer_id": d.reviewer.ParticipantID, "status": "approved"}) {
			t.Errorf("review = %v", r)
		}
		if s := h.Status(t, "proposal", pid); s != "approved" {
			t.Errorf("status = %s", s)
		}
		if evs := h.Events("proposal.approved"); len(evs) != 1 || evs[0].Payload["reviewer_id"] != d.reviewer.ParticipantID {
			t.Errorf("proposal.approved events = %v", evs)
		}
	})

	var bystander string
	t.Run("commit without the commit capability is 403", func(t *testing.T) {
		bystander = str(h.propose(t, d.other.SessionToken, 1, "Plan", "## Plan\n\nstep zero\n")["proposal_id"])
		before := h.Snapshot()
		m := wantError(t, h.commit(t, d.reviewer.SessionToken, pid), http.StatusForbidden, "permission_denied")
		if m["required"] != "commit" {
			t.Errorf("required = %v", m["required"])
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("commit of the approved proposal writes the file and bumps the version", func(t *testing.T) {
		r := okJSON(t, h.commit(t, d.author.SessionToken, pid))
		if num(r["version"]) != 2 || r["participant_id"] != d.author.ParticipantID || r["summary"] != "rewrite Goals" {
			t.Errorf("commit = %v", r)
		}
		if got := h.fileText(t); got != want {
			t.Errorf("file on disk =\n%q\nwant\n%q", got, want)
		}
		if v := h.newestVersion(t); v != 2 {
			t.Errorf("versions max = %d, want 2", v)
		}
		st := okJSON(t, h.get(t, d.reader.SessionToken, "/workspace/status"))
		if num(st["version"]) != 2 {
			t.Errorf("status version = %v", st["version"])
		}
		cc := h.Events("change.committed")
		last := cc[len(cc)-1]
		if num(last.Payload["version"]) != 2 || last.Payload["participant_id"] != d.author.ParticipantID {
			t.Errorf("change.committed = %v", last.Payload)
		}
		if pc := h.Events("proposal.committed"); len(pc) != 1 || pc[0].Payload["proposal_id"] != pid || num(pc[0].Payload["version"]) != 2 {
			t.Errorf("proposal.committed = %v", pc)
		}
		if s := h.Status(t, "proposal", pid); s != "committed" {
			t.Errorf("status = %s", s)
		}
		if s := h.Status(t, "proposal", bystander); s != "superseded" {
			t.Errorf("the pending bystander is %s, want superseded by the commit", s)
		}
	})

	t.Run("propose against an older version says base_is_current false", func(t *testing.T) {
		p := h.propose(t, d.author.SessionToken, 1, "Plan", "## Plan\n\nstep zero\n")
		if p["base_is_current"] != false || p["status"] != "pending" {
			t.Errorf("propose on v1 at v2 = %v", p)
		}
	})

	t.Run("a whole-document proposal replaces the file", func(t *testing.T) {
		id := h.approved(t, d.author.SessionToken, d.reviewer.SessionToken, 2, "", "# Idea\n\nall new\n")
		r := okJSON(t, h.commit(t, d.other.SessionToken, id))
		if num(r["version"]) != 3 {
			t.Errorf("commit = %v", r)
		}
		if got := h.fileText(t); got != "# Idea\n\nall new\n" {
			t.Errorf("file = %q", got)
		}
	})
}

func TestDocumentRawCommit(t *testing.T) {
	d := newCastRoom(t)
	h := d.h

	t.Run("a non-admin session is refused with 403 and nothing changes", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.post(t, d.author.SessionToken, "/workspace/commit",
			map[string]any{"base_version": 1, "summary": "sneak", "content": "# Mine\n"}),
			http.StatusForbidden, "permission_denied")
		if m["required"] != "admin" {
			t.Errorf("required = %v", m["required"])
		}
		h.AssertUnchanged(t, before)
		if h.fileText(t) != harnessDoc {
			t.Errorf("the file changed")
		}
	})

	t.Run("the operator commits whole content", func(t *testing.T) {
		r := okJSON(t, h.operator(t, "/workspace/commit", map[string]any{"base_version": 1, "summary": "host edit", "content": "# Idea\n\nhost text\n\n## Goals\n\nmore\n"}))
		if num(r["version"]) != 2 || r["summary"] != "host edit" || r["participant_id"] != h.Eng.HostID {
			t.Errorf("raw commit = %v", r)
		}
		if got := h.fileText(t); got != "# Idea\n\nhost text\n\n## Goals\n\nmore\n" {
			t.Errorf("file = %q", got)
		}
		if cc := h.Events("change.committed"); num(cc[len(cc)-1].Payload["version"]) != 2 {
			t.Errorf("change.committed = %v", cc[len(cc)-1].Payload)
		}
	})

	t.Run("the operator commits one section with a target", func(t *testing.T) {
		r := okJSON(t, h.operator(t, "/workspace/commit", map[string]any{"base_version": 2, "summary": "goals", "content": "## Goals\n\nless\n", "target": "Goals"}))
		if num(r["version"]) != 3 || r["target"] != "Idea/Goals" {
			t.Errorf("raw commit = %v", r)
		}
		if got := h.fileText(t); got != "# Idea\n\nhost text\n\n## Goals\n\nless\n" {
			t.Errorf("file = %q", got)
		}
	})

	t.Run("an admin session commits raw content on the ingress", func(t *testing.T) {
		admin := h.join("admin", "read", "admin")
		r := okJSON(t, h.post(t, admin.SessionToken, "/workspace/commit", map[string]any{"base_version": 3, "summary": "admin", "content": "# Idea\n"}))
		if num(r["version"]) != 4 || r["participant_id"] != admin.ParticipantID {
			t.Errorf("raw commit = %v", r)
		}
	})

	t.Run("a stale raw commit is 409 stale_version and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.operator(t, "/workspace/commit", map[string]any{"base_version": 2, "summary": "late", "content": "# Late\n"}),
			http.StatusConflict, "stale_version")
		if num(m["current_version"]) != 4 || num(m["base_version"]) != 2 {
			t.Errorf("stale_version = %v", m)
		}
		if diff := str(m["diff"]); !strings.Contains(diff, "--- v4") || !strings.Contains(diff, "+++ attempted@v2") || !strings.Contains(diff, "+# Late") {
			t.Errorf("diff = %q", diff)
		}
		if ch, _ := m["changes"].([]any); len(ch) != 2 || num(jsonAt(ch[0], "version")) != 3 || num(jsonAt(ch[1], "version")) != 4 {
			t.Errorf("changes = %v, want versions 3 and 4", m["changes"])
		}
		h.AssertUnchanged(t, before)
	})
}

// TestDocumentCommitRace: two sessions commit approved proposals made
// against the same base at the same moment. Exactly one wins; the other
// hears stale_version with what it needs to recover, and its proposal is
// conflicted. Several rounds, each from the version the last one left.
func TestDocumentCommitRace(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	for round := range 5 {
		t.Run(fmt.Sprintf("round %d: exactly one commit lands, the other is stale_version and conflicted", round), func(t *testing.T) {
			base := h.newestVersion(t)
			texts := [2]string{fmt.Sprintf("## Goals\n\nauthor round %d\n\n", round), fmt.Sprintf("## Goals\n\nother round %d\n\n", round)}
			ids := [2]string{
				h.approved(t, d.author.SessionToken, d.reviewer.SessionToken, base, "Goals", texts[0]),
				h.approved(t, d.other.SessionToken, d.reviewer.SessionToken, base, "Goals", texts[1]),
			}
			tokens := [2]string{d.author.SessionToken, d.other.SessionToken}
			var answers [2]apiResp
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() {
					<-start
					r, err := h.Send("POST", h.IngressURL("/workspace/commit"), tokens[i], map[string]any{"proposal_id": ids[i]})
					if err != nil {
						r = apiResp{Status: -1, Body: []byte(err.Error())}
					}
					answers[i] = r
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, a := range answers {
				if a.Status == http.StatusOK {
					if winner >= 0 {
						t.Fatalf("both commits answered 200: %s / %s", answers[0].Body, answers[1].Body)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("no commit answered 200: %d %s / %d %s", answers[0].Status, answers[0].Body, answers[1].Status, answers[1].Body)
			}
			loser := 1 - winner
			if num(answers[winner].JSON(t)["version"]) != base+1 {
				t.Errorf("winner = %s, want version %d", answers[winner].Body, base+1)
			}
			m := wantError(t, answers[loser], http.StatusConflict, "stale_version")
			if num(m["current_version"]) != base+1 || num(m["base_version"]) != base || m["proposal_id"] != ids[loser] {
				t.Errorf("stale_version = %v", m)
			}
			diff := str(m["diff"])
			if !strings.Contains(diff, fmt.Sprintf("--- v%d", base+1)) || !strings.Contains(diff, fmt.Sprintf("+++ attempted@v%d", base)) ||
				!strings.Contains(diff, "+"+strings.Split(texts[loser], "\n")[2]) {
				t.Errorf("diff = %q", diff)
			}
			if ch, _ := m["changes"].([]any); len(ch) != 1 || num(jsonAt(ch[0], "version")) != base+1 {
				t.Errorf("changes = %v, want the winner's version", m["changes"])
			}
			if s := h.Status(t, "proposal", ids[winner]); s != "committed" {
				t.Errorf("winner's proposal is %s", s)
			}
			if s := h.Status(t, "proposal", ids[loser]); s != "conflicted" {
				t.Errorf("loser's proposal is %s, want conflicted", s)
			}
			if v := h.newestVersion(t); v != base+1 {
				t.Errorf("version = %d, want %d", v, base+1)
			}
			if got := h.fileText(t); !strings.Contains(got, texts[winner]) || strings.Contains(got, texts[loser]) {
				t.Errorf("file = %q, want the winner's text only", got)
			}
			evs := h.Events("proposal.conflicted")
			if len(evs) == 0 || evs[len(evs)-1].Payload["proposal_id"] != ids[loser] {
				t.Errorf("proposal.conflicted = %v", evs)
			}
		})
	}
}

func TestDocumentReads(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	id := h.approved(t, d.author.SessionToken, d.reviewer.SessionToken, 1, "Goals", "## Goals\n\nship it now\n\n")
	wantOK(t, h.commit(t, d.author.SessionToken, id))
	lease := h.checkout(t, d.other.SessionToken, "Plan")
	pending := str(h.propose(t, d.other.SessionToken, 2, "Plan", "## Plan\n\nstep zero\n")["proposal_id"])
	tok := d.reader.SessionToken

	t.Run("diff from v1 is a unified diff labelled v1 and v2", func(t *testing.T) {
		r := okJSON(t, h.get(t, tok, "/workspace/diff?base_version=1"))
		if r["workspace_id"] != h.Eng.WorkspaceID || num(r["base_version"]) != 1 || num(r["current_version"]) != 2 {
			t.Errorf("diff = %v", r)
		}
		diff := str(r["diff"])
		for _, want := range []string{"--- v1\n", "+++ v2\n", "-ship it\n", "-soon\n", "+ship it now\n"} {
			if !strings.Contains(diff, want) {
				t.Errorf("diff lacks %q:\n%s", want, diff)
			}
		}
	})
	t.Run("diff from the current version is empty", func(t *testing.T) {
		r := okJSON(t, h.get(t, tok, "/workspace/diff?base_version=2"))
		if r["diff"] != "" || num(r["current_version"]) != 2 {
			t.Errorf("diff = %v", r)
		}
	})
	t.Run("changes_since lists later versions oldest first", func(t *testing.T) {
		r := okJSON(t, h.get(t, tok, "/workspace/changes_since?version=1"))
		ch, _ := r["changes"].([]any)
		if num(r["from_version"]) != 1 || num(r["to_version"]) != 2 || len(ch) != 1 ||
			num(jsonAt(ch[0], "version")) != 2 || jsonAt(ch[0], "participant_id") != d.author.ParticipantID {
			t.Errorf("changes_since 1 = %v", r)
		}
		r = okJSON(t, h.get(t, tok, "/workspace/changes_since?version=0"))
		ch, _ = r["changes"].([]any)
		if len(ch) != 2 || num(jsonAt(ch[0], "version")) != 1 || num(jsonAt(ch[1], "version")) != 2 || jsonAt(ch[0], "participant_id") != nil {
			t.Errorf("changes_since 0 = %v", r)
		}
		r = okJSON(t, h.get(t, tok, "/workspace/changes_since?version=0&limit=1"))
		if ch, _ := r["changes"].([]any); len(ch) != 1 {
			t.Errorf("limit=1: %v", r)
		}
	})
	t.Run("leases lists the live lease", func(t *testing.T) {
		ls := okList(t, h.get(t, tok, "/workspace/leases"))
		if len(ls) != 1 || ls[0]["lease_id"] != lease["lease_id"] || ls[0]["target"] != "Idea/Plan" || ls[0]["participant_id"] != d.other.ParticipantID {
			t.Errorf("leases = %v", ls)
		}
	})
	t.Run("proposals lists newest first and filters by status", func(t *testing.T) {
		ps := proposalsOf(t, h.get(t, tok, "/workspace/proposals"))
		if len(ps) != 2 || ps[0]["proposal_id"] != pending || ps[1]["proposal_id"] != id {
			t.Errorf("proposals = %v", ps)
		}
		if ps[1]["status"] != "committed" || num(ps[1]["committed_version"]) != 2 || num(jsonAt(ps[1], "change", "content_bytes")) != int64(len("## Goals\n\nship it now\n\n")) {
			t.Errorf("committed proposal = %v", ps[1])
		}
		if one := okJSON(t, h.get(t, tok, "/workspace/proposal?proposal_id="+id)); jsonAt(one, "change", "content") != "## Goals\n\nship it now\n\n" {
			t.Errorf("GET /workspace/proposal = %v", one)
		}
		if _, has := ps[0]["base_is_current"]; has {
			t.Errorf("base_is_current belongs to the propose answer only: %v", ps[0])
		}
		ps = proposalsOf(t, h.get(t, tok, "/workspace/proposals?status=pending"))
		if len(ps) != 1 || ps[0]["proposal_id"] != pending {
			t.Errorf("pending = %v", ps)
		}
	})
	t.Run("diagnostics name the transport, never an address or a port", func(t *testing.T) {
		r := h.get(t, tok, "/workspace/diagnostics")
		m := okJSON(t, r)
		if !reflect.DeepEqual(m["listener"], map[string]any{"type": "loopback", "mode": "local", "encrypted": false, "describe": "loopback (local, not encrypted)"}) {
			t.Errorf("listener = %v", m["listener"])
		}
		ps, _ := m["participants"].([]any)
		if len(ps) != 5 {
			t.Errorf("participants = %v, want the host and four joiners", ps)
		}
		for _, leak := range []string{"127.0.0.1", "localhost", serverPort(h.Ingress), serverPort(h.Owner), `"address"`, `"port"`} {
			if strings.Contains(string(r.Body), leak) {
				t.Errorf("diagnostics contain %q: %s", leak, r.Body)
			}
		}
	})
	t.Run("room shows handoffs visible to the caller and invites only with invite", func(t *testing.T) {
		creator := h.join("creator", "read", "propose")
		hr := okJSON(t, h.post(t, creator.SessionToken, "/workspace/handoff", map[string]any{"summary": "check the plan"}))
		hid := str(jsonAt(hr, "handoff", "handoff_id"))
		inviter := h.join("inviter", "read", "invite")
		own := str(okJSON(t, h.post(t, inviter.SessionToken, "/workspace/invite", map[string]any{"capabilities": []string{"read"}}))["invite_id"])
		for _, tc := range []struct {
			name         string
			token        string
			wantHandoffs []string
			wantInvites  bool
		}{
			{name: "the creator sees its handoff and no invites", token: creator.SessionToken, wantHandoffs: []string{hid}},
			{name: "a reader who is no party sees no handoff", token: tok, wantHandoffs: []string{}},
			{name: "an inviter sees the invites", token: inviter.SessionToken, wantHandoffs: []string{}, wantInvites: true},
			{name: "a checkout holder sees the open unassigned handoff", token: d.author.SessionToken, wantHandoffs: []string{hid}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := h.get(t, tc.token, "/workspace/room")
				m := okJSON(t, r)
				for _, k := range []string{"status", "participants", "leases", "proposals", "events", "summary", "diagnostics", "handoffs"} {
					if _, ok := m[k]; !ok {
						t.Errorf("room lacks %q", k)
					}
				}
				var got []string
				hs, ok := m["handoffs"].([]any)
				if !ok {
					t.Fatalf("handoffs = %v, want a list", m["handoffs"])
				}
				for _, x := range hs {
					got = append(got, str(jsonAt(x, "handoff_id")))
				}
				if !slices.Equal(got, tc.wantHandoffs) {
					t.Errorf("handoffs = %v, want %v", got, tc.wantHandoffs)
				}
				inv, has := m["invites"]
				if has != tc.wantInvites {
					t.Errorf("invites present = %v, want %v", has, tc.wantInvites)
				}
				if tc.wantInvites {
					// Only its own: the room's other invitations (the host's
					// among them) are not an inviter's to see (issue 13).
					list, _ := inv.([]any)
					if len(list) != 1 || str(jsonAt(list[0], "invite_id")) != own {
						t.Errorf("invites = %v, want exactly the inviter's own %s", inv, own)
					}
					if strings.Contains(string(r.Body), `"token"`) {
						t.Errorf("room invites carry a secret: %s", r.Body)
					}
				}
				if num(jsonAt(m, "status", "version")) != 2 || len(m["leases"].([]any)) != 1 {
					t.Errorf("status/leases = %v / %v", m["status"], m["leases"])
				}
				for _, s := range []party{d.author, d.other, d.reviewer, d.reader, creator, inviter} {
					if strings.Contains(string(r.Body), s.SessionToken) {
						t.Errorf("room view contains a session token")
					}
				}
			})
		}
	})
	t.Run("every read needs a session", func(t *testing.T) {
		for _, p := range []string{"/workspace/diff?base_version=1", "/workspace/changes_since?version=1", "/workspace/leases",
			"/workspace/proposals", "/workspace/diagnostics", "/workspace/room"} {
			wantError(t, h.get(t, "", p), http.StatusUnauthorized, "unauthorized")
		}
	})
	t.Run("every read needs read", func(t *testing.T) {
		observer := h.join("observer", "observe")
		for _, p := range []string{"/workspace/diff?base_version=1", "/workspace/changes_since?version=1", "/workspace/leases",
			"/workspace/proposals", "/workspace/diagnostics", "/workspace/room"} {
			m := wantError(t, h.get(t, observer.SessionToken, p), http.StatusForbidden, "permission_denied")
			if m["required"] != "read" {
				t.Errorf("%s: required = %v", p, m["required"])
			}
		}
	})
}

// TestDocumentBadInput: every refusal has its status and code, names the
// field where there is one, and changes no row and not the file.
func TestDocumentBadInput(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	held := h.checkout(t, d.other.SessionToken, "Plan")
	mine := h.checkout(t, d.author.SessionToken, "Goals")
	pendingID := str(h.propose(t, d.author.SessionToken, 1, "Goals", "## Goals\n\nx\n")["proposal_id"])
	approvedID := h.approved(t, d.author.SessionToken, d.reviewer.SessionToken, 1, "Goals", "## Goals\n\ny\n")
	rejectedID := str(h.propose(t, d.author.SessionToken, 1, "Goals", "## Goals\n\nz\n")["proposal_id"])
	h.review(t, d.reviewer.SessionToken, rejectedID, false)

	big := func(n int) map[string]any {
		return proposeBody(1, "Goals", "## Goals\n\n"+strings.Repeat("a", n))
	}
	const unknownProposal = "proposal_0000000000000000"
	type who int
	const (
		author who = iota
		reviewer
		reader
		operator
	)
	cases := []struct {
		name   string
		who    who
		method string
		path   string
		body   any
		status int
		code   string
		field  string         // the "field" member, when the refusal names one
		also   map[string]any // other members the body must carry
	}{
		{name: "checkout of an unknown region is 400 invalid_region", path: "/workspace/checkout", body: map[string]any{"target": "Nope"},
			status: 400, code: "invalid_region"},
		{name: "checkout of an empty target is 400 naming target", path: "/workspace/checkout", body: map[string]any{"target": ""},
			status: 400, code: "invalid_request", field: "target"},
		{name: "propose for an unknown target is 400 invalid_region", path: "/workspace/propose",
			body: map[string]any{"target": "Nope", "base_version": 1, "change": map[string]any{"content": "x"}}, status: 400, code: "invalid_region"},
		{name: "propose for an unknown change.section is 400 invalid_region", path: "/workspace/propose",
			body: map[string]any{"target": "Goals", "base_version": 1, "change": map[string]any{"content": "x", "section": "Nope"}}, status: 400, code: "invalid_region"},
		{name: "minutes 0 is 400 naming minutes", path: "/workspace/checkout", body: map[string]any{"target": "Idea", "minutes": 0},
			status: 400, code: "invalid_request", field: "minutes"},
		{name: "minutes -1 is 400 naming minutes", path: "/workspace/checkout", body: map[string]any{"target": "Idea", "minutes": -1},
			status: 400, code: "invalid_request", field: "minutes"},
		// Out of range is the caller's mistake: 400, never a retry-inviting 429 (issue 13).
		{name: "minutes 121 is 400 invalid_request naming minutes", path: "/workspace/checkout", body: map[string]any{"target": "Idea", "minutes": 121},
			status: 400, code: "invalid_request", field: "minutes", also: map[string]any{"limit": float64(120)}},
		{name: "minutes 10^12 is 400 invalid_request naming minutes", path: "/workspace/checkout", body: `{"target":"Idea","minutes":1000000000000}`,
			status: 400, code: "invalid_request", field: "minutes"},
		{name: "minutes beyond any integer is 400 naming minutes", path: "/workspace/checkout", body: `{"target":"Idea","minutes":1e30}`,
			status: 400, code: "invalid_request", field: "minutes"},
		{name: "renew with minutes 0 is 400", path: "/workspace/renew", body: map[string]any{"lease_id": mine["lease_id"], "minutes": 0},
			status: 400, code: "invalid_request", field: "minutes"},
		{name: "renew with minutes 121 is 400 invalid_request", path: "/workspace/renew", body: map[string]any{"lease_id": mine["lease_id"], "minutes": 121},
			status: 400, code: "invalid_request", field: "minutes"},
		{name: "a change over 256 KiB is 429 limit_exceeded", path: "/workspace/propose", body: big(256 << 10),
			status: 429, code: "limit_exceeded", field: "change"},
		{name: "a body over 1 MiB is 413 limit_exceeded", path: "/workspace/propose", body: big(1 << 20),
			status: 413, code: "limit_exceeded"},
		{name: "review of an approved proposal is 409 proposal_conflict", who: reviewer, path: "/workspace/proposal/review",
			body: map[string]any{"proposal_id": approvedID, "approve": false}, status: 409, code: "proposal_conflict", also: map[string]any{"proposal_id": approvedID}},
		{name: "review of a rejected proposal is 409 proposal_conflict", who: reviewer, path: "/workspace/proposal/review",
			body: map[string]any{"proposal_id": rejectedID, "approve": true}, status: 409, code: "proposal_conflict", also: map[string]any{"proposal_id": rejectedID}},
		{name: "commit of a pending proposal is 409 proposal_conflict", path: "/workspace/commit",
			body: map[string]any{"proposal_id": pendingID}, status: 409, code: "proposal_conflict", also: map[string]any{"proposal_id": pendingID, "status": "pending"}},
		{name: "commit of a rejected proposal is 409 proposal_conflict", path: "/workspace/commit",
			body: map[string]any{"proposal_id": rejectedID}, status: 409, code: "proposal_conflict", also: map[string]any{"proposal_id": rejectedID}},
		{name: "propose with base_version in the future is 400 naming base_version", path: "/workspace/propose",
			body: proposeBody(99, "Goals", "x"), status: 400, code: "invalid_request", field: "base_version", also: map[string]any{"current_version": float64(1)}},
		{name: "a summary over 2,000 characters is 429 limit_exceeded", path: "/workspace/propose",
			body:   map[string]any{"target": "Goals", "base_version": 1, "summary": strings.Repeat("s", 2001), "change": map[string]any{"content": "x"}},
			status: 429, code: "limit_exceeded", field: "summary"},
		{name: "propose with base_version 0 is 400 naming base_version", path: "/workspace/propose",
			body: proposeBody(0, "Goals", "x"), status: 400, code: "invalid_request", field: "base_version"},
		{name: "raw commit with base_version in the future is 400", who: operator, path: "/workspace/commit",
			body: map[string]any{"base_version": 99, "summary": "x", "content": "x"}, status: 400, code: "invalid_request", field: "base_version"},
		{name: "review of an unknown proposal is 404 proposal_not_found", who: reviewer, path: "/workspace/proposal/review",
			body: map[string]any{"proposal_id": unknownProposal, "approve": true}, status: 404, code: "proposal_not_found", also: map[string]any{"proposal_id": unknownProposal}},
		{name: "commit of an unknown proposal is 404 proposal_not_found", path: "/workspace/commit",
			body: map[string]any{"proposal_id": unknownProposal}, status: 404, code: "proposal_not_found", also: map[string]any{"proposal_id": unknownProposal}},
		{name: "checkout of a section leased by someone else is 409 lease_conflict", path: "/workspace/checkout", body: map[string]any{"target": "Plan"},
			status: 409, code: "lease_conflict", also: map[string]any{"lease_id": held["lease_id"], "region": "Idea/Plan"}},
		{name: "renew of someone else's lease is 403", path: "/workspace/renew", body: map[string]any{"lease_id": held["lease_id"]},
			status: 403, code: "permission_denied", also: map[string]any{"lease_id": held["lease_id"]}},
		{name: "release of an unknown lease is 409 lease_conflict", path: "/workspace/release", body: map[string]any{"lease_id": "lease_0000000000000000"},
			status: 409, code: "lease_conflict", also: map[string]any{"lease_id": "lease_0000000000000000"}},
		{name: "diff without base_version is 400", method: "GET", path: "/workspace/diff", status: 400, code: "invalid_request", field: "base_version"},
		{name: "diff with a base_version that is not a number is 400", method: "GET", path: "/workspace/diff?base_version=one", status: 400, code: "invalid_request", field: "base_version"},
		{name: "diff of an unknown version is 404 version_not_found", method: "GET", path: "/workspace/diff?base_version=99", status: 404, code: "version_not_found"},
		{name: "diff of version 0 is 404 version_not_found", method: "GET", path: "/workspace/diff?base_version=0", status: 404, code: "version_not_found"},
		{name: "changes_since without version is 400", method: "GET", path: "/workspace/changes_since", status: 400, code: "invalid_request", field: "version"},
		{name: "changes_since of a future version is 404 version_not_found", method: "GET", path: "/workspace/changes_since?version=99", status: 404, code: "version_not_found"},
		{name: "proposals of an unknown status is 400", method: "GET", path: "/workspace/proposals?status=bogus", status: 400, code: "invalid_request", field: "status"},
		{name: "malformed JSON is 400", path: "/workspace/checkout", body: `{"target": "Goals"`, status: 400, code: "invalid_request"},
		{name: "a JSON array body is 400", path: "/workspace/propose", body: `[1]`, status: 400, code: "invalid_request"},
		{name: "data after the object is 400", path: "/workspace/checkout", body: `{"target":"Idea"} {}`, status: 400, code: "invalid_request"},
		{name: "a number for target is 400 naming target", path: "/workspace/checkout", body: map[string]any{"target": 5}, status: 400, code: "invalid_request", field: "target"},
		{name: "a string for minutes is 400 naming minutes", path: "/workspace/checkout", body: map[string]any{"target": "Idea", "minutes": "ten"}, status: 400, code: "invalid_request", field: "minutes"},
		{name: "a string for base_version is 400 naming base_version", path: "/workspace/propose",
			body: map[string]any{"target": "Goals", "base_version": "1", "change": map[string]any{"content": "x"}}, status: 400, code: "invalid_request", field: "base_version"},
		{name: "a number for change.content is 400 naming change.content", path: "/workspace/propose",
			body: map[string]any{"target": "Goals", "base_version": 1, "change": map[string]any{"content": 7}}, status: 400, code: "invalid_request", field: "change.content"},
		{name: "a string for change is 400 naming change", path: "/workspace/propose",
			body: map[string]any{"target": "Goals", "base_version": 1, "change": "x"}, status: 400, code: "invalid_request", field: "change"},
		{name: "a missing change.content is 400 naming change.content", path: "/workspace/propose",
			body: map[string]any{"target": "Goals", "base_version": 1, "change": map[string]any{"section": "Goals"}}, status: 400, code: "invalid_request", field: "change.content"},
		{name: "a string for approve is 400 naming approve", who: reviewer, path: "/workspace/proposal/review",
			body: map[string]any{"proposal_id": pendingID, "approve": "yes"}, status: 400, code: "invalid_request", field: "approve"},
		{name: "a missing approve is 400 naming approve", who: reviewer, path: "/workspace/proposal/review",
			body: map[string]any{"proposal_id": pendingID}, status: 400, code: "invalid_request", field: "approve"},
		{name: "a number for proposal_id is 400 naming proposal_id", path: "/workspace/commit", body: map[string]any{"proposal_id": 5}, status: 400, code: "invalid_request", field: "proposal_id"},
		{name: "a boolean for lease_id is 400 naming lease_id", path: "/workspace/release", body: map[string]any{"lease_id": true}, status: 400, code: "invalid_request", field: "lease_id"},
		{name: "commit with neither proposal_id nor content is 400", path: "/workspace/commit", body: map[string]any{}, status: 400, code: "invalid_request", field: "proposal_id"},
		{name: "commit mixing proposal_id and content is 400", path: "/workspace/commit",
			body: map[string]any{"proposal_id": approvedID, "content": "x"}, status: 400, code: "invalid_request", field: "proposal_id"},
		{name: "propose without the propose capability is 403", who: reader, path: "/workspace/propose", body: proposeBody(1, "Goals", "x"),
			status: 403, code: "permission_denied", also: map[string]any{"required": "propose"}},
		{name: "commit without the commit capability is 403", who: reviewer, path: "/workspace/commit", body: map[string]any{"proposal_id": approvedID},
			status: 403, code: "permission_denied", also: map[string]any{"required": "commit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			url, token := h.IngressURL(tc.path), d.author.SessionToken
			switch tc.who {
			case reviewer:
				token = d.reviewer.SessionToken
			case reader:
				token = d.reader.SessionToken
			case operator:
				url, token = h.OwnerURL(tc.path), h.OpToken
			}
			before := h.Snapshot()
			m := wantError(t, h.Do(t, method, url, token, tc.body), tc.status, tc.code)
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %q; body %v", m["field"], tc.field, m)
			}
			for k, v := range tc.also {
				if !reflect.DeepEqual(m[k], v) {
					t.Errorf("%s = %v, want %v", k, m[k], v)
				}
			}
			h.AssertUnchanged(t, before)
			if h.fileText(t) != harnessDoc {
				t.Errorf("the file changed")
			}
		})
	}
	t.Run("the states the refusals left alone", func(t *testing.T) {
		for id, want := range map[string]string{pendingID: "pending", approvedID: "approved", rejectedID: "rejected"} {
			if s := h.Status(t, "proposal", id); s != want {
				t.Errorf("%s is %s, want %s", id, s, want)
			}
		}
	})
}

// TestDocumentMCPRoundTrip: the whole change flow through /mcp tools only.
func TestDocumentMCPRoundTrip(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	author := newMCPClient(h, d.author.SessionToken, false)
	reviewer := newMCPClient(h, d.reviewer.SessionToken, false)
	newPlan := "## Plan\n\nstep one\nstep two, done\n"

	t.Run("propose, review, commit and release through tools write the file", func(t *testing.T) {
		st := author.toolOK(t, "workspace_status", nil)
		base := num(st["version"])
		rd := author.toolOK(t, "workspace_read", map[string]any{"section": "Plan"})
		if num(rd["version"]) != base || !strings.Contains(str(rd["content"]), "step three") {
			t.Fatalf("workspace_read = %v", rd)
		}
		lease := author.toolOK(t, "workspace_checkout", map[string]any{"target": "section:Plan", "minutes": 30})
		if lease["target"] != "Idea/Plan" {
			t.Errorf("checkout = %v", lease)
		}
		if ls := author.toolOK(t, "workspace_leases", nil); len(ls["leases"].([]any)) != 1 {
			t.Errorf("leases = %v", ls)
		}
		p := author.toolOK(t, "workspace_propose", map[string]any{"target": "Plan", "base_version": base, "summary": "finish step two",
			"change": map[string]any{"content": newPlan, "section": "Plan"}})
		pid := str(p["proposal_id"])
		if p["status"] != "pending" || p["base_is_current"] != true {
			t.Fatalf("propose = %v", p)
		}
		pending := reviewer.toolOK(t, "workspace_proposals", map[string]any{"status": "pending"})
		if ps, _ := pending["proposals"].([]any); len(ps) != 1 || jsonAt(ps[0], "proposal_id") != pid {
			t.Fatalf("pending proposals = %v", pending)
		}
		author.toolErr(t, "workspace_review", map[string]any{"proposal_id": pid, "approve": true}, "permission_denied")
		rv := reviewer.toolOK(t, "workspace_review", map[string]any{"proposal_id": pid, "approve": true})
		if rv["status"] != "approved" || rv["reviewer_id"] != d.reviewer.ParticipantID {
			t.Fatalf("review = %v", rv)
		}
		c := author.toolOK(t, "workspace_commit", map[string]any{"proposal_id": pid})
		if num(c["version"]) != base+1 || c["summary"] != "finish step two" {
			t.Fatalf("commit = %v", c)
		}
		if got, want := h.fileText(t), strings.Replace(harnessDoc, regionPlan, newPlan, 1); got != want {
			t.Errorf("file = %q, want %q", got, want)
		}
		df := author.toolOK(t, "workspace_diff", map[string]any{"base_version": base})
		if !strings.Contains(str(df["diff"]), "+step two, done") {
			t.Errorf("diff = %v", df)
		}
		cs := author.toolOK(t, "workspace_changes_since", map[string]any{"version": base})
		if ch, _ := cs["changes"].([]any); len(ch) != 1 || jsonAt(ch[0], "summary") != "finish step two" {
			t.Errorf("changes_since = %v", cs)
		}
		if r := author.toolOK(t, "workspace_release", map[string]any{"lease_id": lease["lease_id"]}); r["status"] != "ok" {
			t.Errorf("release = %v", r)
		}
		if s := h.Status(t, "proposal", pid); s != "committed" {
			t.Errorf("proposal is %s", s)
		}
		// The HTTP view agrees with what the tools did.
		if v := num(okJSON(t, h.get(t, d.reader.SessionToken, "/workspace/status"))["version"]); v != base+1 {
			t.Errorf("HTTP status version = %d", v)
		}
	})

	t.Run("a stale commit is an isError result carrying current_version, diff and changes", func(t *testing.T) {
		other := newMCPClient(h, d.other.SessionToken, false)
		base := h.newestVersion(t)
		ids := [2]string{}
		for i, c := range []*mcpClient{author, other} {
			p := c.toolOK(t, "workspace_propose", map[string]any{"target": "Goals", "base_version": base, "summary": fmt.Sprintf("goals %d", i),
				"change": map[string]any{"content": fmt.Sprintf("## Goals\n\nversion %d\n\n", i), "section": "Goals"}})
			ids[i] = str(p["proposal_id"])
			reviewer.toolOK(t, "workspace_review", map[string]any{"proposal_id": ids[i], "approve": true})
		}
		author.toolOK(t, "workspace_commit", map[string]any{"proposal_id": ids[0]})
		sc := other.toolErr(t, "workspace_commit", map[string]any{"proposal_id": ids[1]}, "stale_version")
		if num(sc["current_version"]) != base+1 || num(sc["base_version"]) != base || sc["proposal_id"] != ids[1] {
			t.Errorf("stale_version = %v", sc)
		}
		if diff := str(sc["diff"]); !strings.Contains(diff, "+version 1") || !strings.Contains(diff, "-version 0") {
			t.Errorf("diff = %q", diff)
		}
		if ch, _ := sc["changes"].([]any); len(ch) != 1 || num(jsonAt(ch[0], "version")) != base+1 {
			t.Errorf("changes = %v", sc["changes"])
		}
		if s := h.Status(t, "proposal", ids[1]); s != "conflicted" {
			t.Errorf("proposal is %s, want conflicted", s)
		}
	})
}

// TestDocumentCommitNotifiesResources: after a commit, subscriptions/listen
// carries notifications/resources/updated for the document and for each
// section whose text changed, and none for a section left alone. Frames of
// one stream keep commit order, so a later commit is the sentinel: a frame
// for the untouched section would arrive before the later commit's frames.
func TestDocumentCommitNotifiesResources(t *testing.T) {
	d := newCastRoom(t)
	h := d.h
	doc := h.Eng.DocumentURI()
	idea, goals, plan := h.Eng.SectionURI("Idea"), h.Eng.SectionURI("Idea/Goals"), h.Eng.SectionURI("Idea/Plan")
	all, acked := h.listenURIs(t, d.reader.SessionToken, 7, []string{doc, idea, goals, plan})
	if !sameSet(acked, []string{doc, idea, goals, plan}) {
		t.Fatalf("acknowledged %v", acked)
	}
	planOnly, acked := h.listenURIs(t, d.other.SessionToken, 8, []string{doc, plan})
	if !sameSet(acked, []string{doc, plan}) {
		t.Fatalf("acknowledged %v", acked)
	}
	// uris reads n resources/updated frames of s and returns their URIs.
	uris := func(t *testing.T, s *stream, subID float64, n int) []string {
		t.Helper()
		var got []string
		for range n {
			f := s.Next(t)
			if f.Msg.Method != "notifications/resources/updated" || f.Msg.ID != nil {
				t.Fatalf("frame %.300s, want a notifications/resources/updated notification", string(f.Data))
			}
			if id := jsonAt(f.Params(), "_meta", "io.modelcontextprotocol/subscriptionId"); id != subID {
				t.Errorf("subscriptionId = %v, want %v", id, subID)
			}
			got = append(got, str(f.Params()["uri"]))
		}
		return got
	}

	// Proposing and reviewing change no resource: the first frames belong
	// to the first commit.
	id := h.approved(t, d.author.SessionToken, d.reviewer.SessionToken, 1, "Goals", "## Goals\n\nship it today\n\n")
	wantOK(t, h.commit(t, d.author.SessionToken, id))
	wantOK(t, h.operator(t, "/workspace/commit", map[string]any{"base_version": 2, "target": "Plan", "content": "## Plan\n\nstep zero\n", "summary": "plan"}))

	t.Run("a commit to Goals notifies the document, Idea and Goals, and not Plan", func(t *testing.T) {
		got := uris(t, all, 7, 3)
		if got[0] != doc || !sameSet(got, []string{doc, idea, goals}) {
			t.Errorf("first commit: frames for %v, want the document first, then Idea and Idea/Goals", got)
		}
	})
	t.Run("the next commit, to Plan, notifies the document, Idea and Plan", func(t *testing.T) {
		got := uris(t, all, 7, 3)
		if got[0] != doc || !sameSet(got, []string{doc, idea, plan}) {
			t.Errorf("second commit: frames for %v, want the document first, then Idea and Idea/Plan", got)
		}
	})
	t.Run("a stream following only the document and Plan hears Plan once, after the second commit", func(t *testing.T) {
		if got := uris(t, planOnly, 8, 3); !slices.Equal(got, []string{doc, doc, plan}) {
			t.Errorf("frames for %v, want [document, document, Plan]", got)
		}
	})
}
