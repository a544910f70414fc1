package httpapi

// End-to-end tests of subscriptions/listen over real HTTP on 127.0.0.1: a
// real room, its hub, and the front door, read by an SSE client that parses
// data: lines. The rules are the MCP 2026-07-28 listen rules, DESIGN §6
// and ARCHITECTURE.md D17–D19. Absence of a frame is never proven by waiting:
// a later change that must be delivered is sent, and the order checked.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

func TestListenValidation(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	o := h.join("owner", "read", "propose")
	own := h.newTask(t, o.SessionToken, "write the intro")
	before := h.Snapshot()

	t.Run("taskIds without the tasks extension is 400 -32021 before any lookup, no stream", func(t *testing.T) {
		for _, ids := range [][]string{{own.TaskID}, {"task_00000000000000000000000000000000"}} {
			s, r := h.ListenReq(t, c, o.SessionToken, "5", map[string]any{"taskIds": ids}, false)
			if s != nil {
				t.Fatalf("taskIds %v without the extension opened a stream", ids)
			}
			if r.Status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32021 {
				t.Fatalf("taskIds %v without the extension: %d %s, want 400 -32021", ids, r.Status, r.Raw)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if string(r.ID) != "5" {
				t.Errorf("error id %s, want 5", r.ID)
			}
			req, _ := r.Error.Data["requiredCapabilities"].(map[string]any)
			ext, _ := req["extensions"].(map[string]any)
			if v, ok := ext[mcptest.TasksExtension].(map[string]any); !ok || len(v) != 0 {
				t.Errorf("data.requiredCapabilities = %v, want extensions[%q] = {}", r.Error.Data, mcptest.TasksExtension)
			}
		}
	})

	t.Run("missing notifications is -32602, no stream", func(t *testing.T) {
		s, r := h.ListenReq(t, c, o.SessionToken, "6", nil, true)
		if s != nil {
			t.Fatal("a listen without params.notifications opened a stream")
		}
		if r.Error == nil || r.Error.Code != -32602 || string(r.ID) != "6" {
			t.Fatalf("listen without notifications: %d %s, want -32602 for id 6", r.Status, r.Raw)
		}
	})

	t.Run("notifications that is not an object is -32602, no stream", func(t *testing.T) {
		for _, bad := range []any{[]any{}, "all", map[string]any{"taskIds": "one"}, map[string]any{"resourceSubscriptions": map[string]any{}}} {
			s, r := h.ListenReq(t, c, o.SessionToken, "8", bad, true)
			if s != nil {
				t.Fatalf("notifications %v opened a stream", bad)
			}
			if r.Error == nil || r.Error.Code != -32602 {
				t.Fatalf("notifications %v: %d %s, want -32602", bad, r.Status, r.Raw)
			}
		}
	})

	t.Run("no bearer is 401 with a Bearer challenge, no stream", func(t *testing.T) {
		for _, tok := range []string{"", "ses_not_a_session"} {
			s, r := h.ListenReq(t, c, tok, "9", map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
			if s != nil {
				t.Fatalf("token %q opened a stream", tok)
			}
			if r.Status != http.StatusUnauthorized || r.Error == nil || r.Error.Code != -31001 {
				t.Fatalf("token %q: %d %s, want 401 -31001", tok, r.Status, r.Raw)
			}
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", r.Header.Get("WWW-Authenticate"))
			}
		}
	})

	t.Run("refused listens register nothing and change nothing", func(t *testing.T) {
		if st := h.Hub.Stats(); st.Subscribers != 0 {
			t.Errorf("hub has %d subscribers after only refused listens", st.Subscribers)
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("listen is answered 200 text/event-stream, acknowledgement first", func(t *testing.T) {
		s, r := h.ListenReq(t, c, o.SessionToken, "10", map[string]any{"taskIds": []string{own.TaskID}}, true)
		if s == nil {
			t.Fatalf("listen refused: %d %s", r.Status, r.Raw)
		}
		if ct := s.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type %q, want text/event-stream", ct)
		}
		if cc := s.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("Cache-Control %q, want no-cache", cc)
		}
		s.Start()
		if got := decodeStrings(t, s.Ack(t)["taskIds"]); !slices.Equal(got, []string{own.TaskID}) {
			t.Errorf("acknowledged taskIds %v, want [%s]", got, own.TaskID)
		}
	})
}

func TestListenAcknowledgement(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	b := h.NewBarrier(t, c)
	o := h.join("owner", "read", "propose", "approve")
	a := h.join("assignee", "read", "checkout")
	x := h.join("stranger", "read", "propose")
	n := h.join("no-read", "propose")
	adm := h.join("admin", "admin")
	mine := h.newTask(t, o.SessionToken, "mine")
	foreign := h.newTask(t, x.SessionToken, "someone else's")
	h.acceptTask(t, a.SessionToken, mine)
	noReadTask := h.newTask(t, n.SessionToken, "made by a session that cannot read")
	b.Wait(t)

	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	unknown := "task_ffffffffffffffffffffffffffffffff"
	asked := map[string]any{
		"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
		"resourceSubscriptions": []string{doc, goals, doc, "commonroom://workspace/ws_someone_else",
			"file:///etc/hosts", doc + "/section/", doc + "/other"},
		"taskIds": []string{mine.TaskID, foreign.TaskID, unknown, mine.TaskID},
	}
	onlyKnownKeys := func(t *testing.T, ack map[string]json.RawMessage) {
		t.Helper()
		for k := range ack {
			if k != "resourceSubscriptions" && k != "taskIds" {
				t.Errorf("acknowledgement lists %q = %s; the server never sends it", k, ack[k])
			}
		}
	}
	edits := 0
	edit := func(t *testing.T) {
		t.Helper()
		edits++
		h.EditFile(t, o.SessionToken, threeSections("hello world"+strings.Repeat("!", edits), "ship it\nsoon", "step one\nstep two\nstep three"))
	}

	for i, id := range []string{"42", `"42"`, `"sub-7"`, "-3"} {
		key := fmt.Sprintf("k%d", i)
		t.Run("id "+id+": honoured items only, and every frame carries it with its JSON type", func(t *testing.T) {
			s, ack := h.Listen(t, c, o.SessionToken, id, asked, true)
			onlyKnownKeys(t, ack)
			if got := decodeStrings(t, ack["resourceSubscriptions"]); !sameSet(got, []string{doc, goals}) {
				t.Errorf("acknowledged resourceSubscriptions %v, want exactly [%s %s]", got, doc, goals)
			}
			if got := decodeStrings(t, ack["taskIds"]); !slices.Equal(got, []string{mine.TaskID}) {
				t.Errorf("acknowledged taskIds %v, want only the session's own [%s] (not the foreign or unknown one)", got, mine.TaskID)
			}
			// A task frame, a resource frame and the final result all carry the id.
			h.askInput(t, a.SessionToken, mine, key, "which tone?")
			s.ExpectTask(t, mine.TaskID, room.TaskInputRequired)
			h.answerInput(t, o.SessionToken, mine, key)
			s.ExpectTask(t, mine.TaskID, room.TaskWorking)
			edit(t)
			s.ExpectRes(t, doc)
			h.CancelListen(t, o.SessionToken, id)
			s.ExpectFinal(t)
		})
	}

	t.Run("a session without read gets no resourceSubscriptions and no resource frames", func(t *testing.T) {
		s, ack := h.Listen(t, c, n.SessionToken, "1", asked, true)
		onlyKnownKeys(t, ack)
		if _, ok := ack["resourceSubscriptions"]; ok {
			t.Errorf("a session without read was acknowledged resourceSubscriptions %s", ack["resourceSubscriptions"])
		}
		// Its own task is not among what it asked for, so nothing is acknowledged.
		if _, ok := ack["taskIds"]; ok {
			t.Errorf("acknowledged taskIds %s for tasks this session cannot read", ack["taskIds"])
		}
		s.Close()
		s2, ack2 := h.Listen(t, c, n.SessionToken, "2", map[string]any{
			"resourceSubscriptions": []string{doc}, "taskIds": []string{noReadTask.TaskID}}, true)

		if _, ok := ack2["resourceSubscriptions"]; ok {
			t.Errorf("a session without read was acknowledged resourceSubscriptions %s", ack2["resourceSubscriptions"])
		}
		if got := decodeStrings(t, ack2["taskIds"]); !slices.Equal(got, []string{noReadTask.TaskID}) {
			t.Errorf("acknowledged taskIds %v, want its own task", got)
		}
		edit(t)
		h.cancelTask(t, n.SessionToken, noReadTask)
		// The edit came first; the first frame must still be the task's.
		s2.ExpectTask(t, noReadTask.TaskID, room.TaskCancelled)
	})

	t.Run("the assignee gets the task it took; a stranger gets none of it", func(t *testing.T) {
		_, ack := h.Listen(t, c, a.SessionToken, "1", map[string]any{"taskIds": []string{mine.TaskID, foreign.TaskID}}, true)
		if got := decodeStrings(t, ack["taskIds"]); !slices.Equal(got, []string{mine.TaskID}) {
			t.Errorf("assignee acknowledged taskIds %v, want [%s]", got, mine.TaskID)
		}
		_, ack = h.Listen(t, c, x.SessionToken, "1", map[string]any{"taskIds": []string{mine.TaskID, unknown}}, true)
		if _, ok := ack["taskIds"]; ok {
			t.Errorf("stranger acknowledged taskIds %s, want none", ack["taskIds"])
		}
		_, ack = h.Listen(t, c, adm.SessionToken, "1", map[string]any{"taskIds": []string{mine.TaskID, foreign.TaskID, unknown}}, true)
		if got := decodeStrings(t, ack["taskIds"]); !sameSet(got, []string{mine.TaskID, foreign.TaskID}) {
			t.Errorf("admin acknowledged taskIds %v, want both real tasks", got)
		}
	})

	t.Run("a listen asking for nothing honourable is acknowledged with an empty filter", func(t *testing.T) {
		s, ack := h.Listen(t, c, o.SessionToken, `"empty"`, map[string]any{
			"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
			"resourceSubscriptions": []string{"file:///nope"}, "taskIds": []string{unknown, foreign.TaskID}}, true)

		if len(ack) != 0 {
			t.Errorf("acknowledged %v, want {}", ack)
		}
		h.CancelListen(t, o.SessionToken, `"empty"`)
		s.ExpectFinal(t)
	})
}

func TestListenTaskNotifications(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	b := h.NewBarrier(t, c)
	o := h.join("owner", "read", "propose", "approve")
	a := h.join("assignee", "read", "checkout")
	x := h.join("stranger", "read", "propose")
	t1 := h.newTask(t, o.SessionToken, "draft the plan")
	t2 := h.newTask(t, o.SessionToken, "second job")
	tx := h.newTask(t, x.SessionToken, "the stranger's job")
	b.Wait(t)

	so, ack := h.Listen(t, c, o.SessionToken, "7", map[string]any{"taskIds": []string{t1.TaskID, tx.TaskID, t2.TaskID}}, true)
	if got := decodeStrings(t, ack["taskIds"]); !sameSet(got, []string{t1.TaskID, t2.TaskID}) {
		t.Fatalf("owner acknowledged %v, want its two tasks and not the foreign one", got)
	}
	sx, _ := h.Listen(t, c, x.SessionToken, `"x"`, map[string]any{"taskIds": []string{tx.TaskID}}, true)
	var sa *stream

	// step makes one foreign change, then one change of t1, and checks that
	// every stream following t1 gets exactly that change, equal to tasks/get.
	step := func(t *testing.T, status string, foreignChange, change func()) {
		t.Helper()
		h.Clock.Advance(time.Second) // so lastUpdatedAt tells the states apart
		foreignChange()
		change()
		f := so.ExpectTask(t, t1.TaskID, status)
		sameTask(t, f, h.getTask(t, o.SessionToken, t1))
		if sa != nil {
			f := sa.ExpectTask(t, t1.TaskID, status)
			sameTask(t, f, h.getTask(t, a.SessionToken, t1))
		}
		// The stranger's own stream got the foreign change, so it was
		// published before t1's; the owner's stream skipped it.
		sx.Check(t, sx.Next(t), mcptest.TaskMethod)
	}

	outer := t // the assignee's stream outlives the subtest that opens it
	t.Run("accept is delivered as tasks/get shows it", func(t *testing.T) {
		step(t, room.TaskWorking,
			func() { h.acceptTask(t, a.SessionToken, tx) },
			func() { h.acceptTask(t, a.SessionToken, t1) })
		var ack map[string]json.RawMessage
		sa, ack = h.Listen(outer, c, a.SessionToken, `"a-1"`, map[string]any{"taskIds": []string{t1.TaskID, tx.TaskID, t2.TaskID}}, true)
		if got := decodeStrings(t, ack["taskIds"]); !sameSet(got, []string{t1.TaskID, tx.TaskID}) {
			t.Fatalf("assignee acknowledged %v, want the two tasks it took", got)
		}
	})
	if sa == nil {
		t.Fatal("the assignee's stream did not open")
	}

	t.Run("a request for input is delivered with its inputRequests", func(t *testing.T) {
		step(t, room.TaskInputRequired,
			func() {
				h.askInput(t, a.SessionToken, tx, "fx", "foreign?")
				sa.ExpectTask(t, tx.TaskID, room.TaskInputRequired)
			},
			func() { h.askInput(t, a.SessionToken, t1, "tone", "formal or casual?") })
	})

	t.Run("an answer via tasks/update is delivered", func(t *testing.T) {
		step(t, room.TaskWorking,
			func() {
				h.answerInput(t, x.SessionToken, tx, "fx")
				sa.ExpectTask(t, tx.TaskID, room.TaskWorking)
			},
			func() { h.answerInput(t, o.SessionToken, t1, "tone") })
	})

	t.Run("completion is delivered with the result", func(t *testing.T) {
		step(t, room.TaskCompleted,
			func() {
				h.completeTask(t, a.SessionToken, tx, "foreign result")
				sa.ExpectTask(t, tx.TaskID, room.TaskCompleted)
			},
			func() { h.completeTask(t, a.SessionToken, t1, "the plan, drafted") })
	})

	t.Run("approval changes no task and sends nothing; a later change still arrives", func(t *testing.T) {
		newMCPClient(h, o.SessionToken, false).toolOK(t, "handoff_approve", map[string]any{"handoff_id": t1.HandoffID})
		h.Clock.Advance(time.Second)
		h.cancelTask(t, o.SessionToken, t2)
		f := so.ExpectTask(t, t2.TaskID, room.TaskCancelled)
		sameTask(t, f, h.getTask(t, o.SessionToken, t2))
	})

	t.Run("the foreign task's changes never reached the owner's stream", func(t *testing.T) {
		// Every frame so far was consumed in order above; nothing is left.
		h.CancelListen(t, o.SessionToken, "7")
		so.ExpectFinal(t)
	})
}

func TestListenResourceUpdates(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	r := h.join("reader", "read")
	tok := r.SessionToken
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")

	sDoc, ack := h.Listen(t, c, tok, "1", map[string]any{"resourceSubscriptions": []string{doc}}, false)
	if got := decodeStrings(t, ack["resourceSubscriptions"]); !slices.Equal(got, []string{doc}) {
		t.Fatalf("acknowledged %v", got)
	}
	sBoth, _ := h.Listen(t, c, tok, "2", map[string]any{"resourceSubscriptions": []string{goals, plan}}, false)
	sGoals, _ := h.Listen(t, c, tok, `"3"`, map[string]any{"resourceSubscriptions": []string{goals}}, false)

	type want struct {
		doc, both, goals []string
	}
	steps := []struct {
		name    string
		content string
		want    want
	}{
		{"editing Plan notifies the document and Plan only",
			threeSections("hello world", "ship it\nsoon", "step one\nstep two\nstep three\nstep four"),
			want{[]string{doc}, []string{plan}, nil}},
		{"editing Goals notifies the document and Goals",
			threeSections("hello world", "ship it\nsoon\nand well", "step one\nstep two\nstep three\nstep four"),
			want{[]string{doc}, []string{goals}, []string{goals}}},
		{"editing the intro notifies no section subscriber",
			threeSections("hello wide world", "ship it\nsoon\nand well", "step one\nstep two\nstep three\nstep four"),
			want{[]string{doc}, nil, nil}},
		{"Goals vanishing notifies Goals",
			"# Idea\n\nhello wide world\n\n## Plan\n\nstep one\nstep two\nstep three\nstep four\n",
			want{[]string{doc}, []string{goals}, []string{goals}}},
		{"editing Plan again does not notify the vanished Goals",
			"# Idea\n\nhello wide world\n\n## Plan\n\nstep one\nstep two\n",
			want{[]string{doc}, []string{plan}, nil}},
		{"Goals reappearing notifies Goals",
			threeSections("hello wide world", "back again", "step one\nstep two"),
			want{[]string{doc}, []string{goals}, []string{goals}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			h.EditFile(t, tok, st.content)
			// Streams expecting nothing are checked by the next step that
			// notifies them: a stray frame would come first and mismatch.
			for _, x := range []struct {
				s    *stream
				uris []string
			}{{sDoc, st.want.doc}, {sBoth, st.want.both}, {sGoals, st.want.goals}} {
				for _, u := range x.uris {
					x.s.ExpectRes(t, u)
				}
			}
		})
	}
	t.Run("a frame carries only the uri besides _meta", func(t *testing.T) {
		h.EditFile(t, tok, threeSections("hello wide world!", "back again", "step one\nstep two"))
		f := sDoc.ExpectRes(t, doc)
		for k := range f.Msg.Params {
			if k != "uri" && k != "_meta" {
				t.Errorf("resources/updated params has %q: %s", k, f)
			}
		}
	})
	t.Run("no stray frame is left on any stream", func(t *testing.T) {
		for _, s := range []*stream{sDoc, sBoth, sGoals} {
			h.CancelListen(t, tok, s.ID)
			s.ExpectFinal(t)
		}
	})
}

// taskChange is a task change as a stream should show it.
type taskChange struct{ task, status, key string }

func TestListenOrderIsCommitOrder(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	b := h.NewBarrier(t, c)
	o := h.join("owner", "read", "propose")
	a := h.join("assignee", "read", "checkout")
	m := h.join("admin", "admin")
	tasks := make([]taskRef, 3)
	for i := range tasks {
		tasks[i] = h.newTask(t, o.SessionToken, fmt.Sprintf("job %d", i))
		h.acceptTask(t, a.SessionToken, tasks[i])
	}
	b.Wait(t)
	ids := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, tasks[i].TaskID)
		}
		return out
	}
	type follower struct {
		s     *stream
		tasks []string
	}
	var fs []follower
	for _, x := range []struct {
		tok, id string
		idx     []int
	}{
		{o.SessionToken, "1", []int{0, 1, 2}}, {o.SessionToken, `"o-2"`, []int{1}}, {o.SessionToken, "3", []int{2, 0}},
		{a.SessionToken, `"a"`, []int{0, 1, 2}}, {a.SessionToken, "5", []int{0}},
		{m.SessionToken, "6", []int{2, 1, 0}},
	} {
		s, ack := h.Listen(t, c, x.tok, x.id, map[string]any{"taskIds": ids(x.idx...)}, true)
		if got := decodeStrings(t, ack["taskIds"]); !sameSet(got, ids(x.idx...)) {
			t.Fatalf("stream %s acknowledged %v", x.id, got)
		}
		fs = append(fs, follower{s, ids(x.idx...)})
	}
	firstEvent := h.Count(`SELECT COALESCE(MAX(event_id), 0) FROM events`)

	// Three writers change the three tasks at once, many times in a row.
	const rounds = 12
	et := collect(t)
	var wg sync.WaitGroup
	for _, x := range tasks {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprintf("q%02d", i)
				h.askInput(et, a.SessionToken, x, key, "question "+key)
				h.answerInput(et, o.SessionToken, x, key)
			}
		})
	}
	wg.Wait()
	et.report(t)

	// The commit order is the order of the events the changes wrote.
	rows, err := h.Store.Reader.Query(`SELECT event_type, task_id, payload_json FROM events
		WHERE event_id > ? AND event_type IN ('handoff.input_requested', 'handoff.input_received') ORDER BY event_id`, firstEvent)
	if err != nil {
		t.Fatal(err)
	}
	var commits []taskChange
	for rows.Next() {
		var typ, task, payload string
		if err := rows.Scan(&typ, &task, &payload); err != nil {
			t.Fatal(err)
		}
		var p struct{ Keys []string }
		_ = json.Unmarshal([]byte(payload), &p)
		if typ == "handoff.input_requested" {
			commits = append(commits, taskChange{task, room.TaskInputRequired, p.Keys[0]})
		} else {
			commits = append(commits, taskChange{task, room.TaskWorking, ""})
		}
	}
	rows.Close()
	if len(commits) != 3*2*rounds {
		t.Fatalf("%d commits recorded, want %d", len(commits), 3*2*rounds)
	}
	for _, f := range fs {
		t.Run(fmt.Sprintf("stream %s sees its tasks in commit order", f.s.ID), func(t *testing.T) {
			var want []taskChange
			for _, c := range commits {
				if slices.Contains(f.tasks, c.task) {
					want = append(want, c)
				}
			}
			for i, w := range want {
				fr := f.s.Next(t)
				f.s.Check(t, fr, mcptest.TaskMethod)
				id, status, keys := fr.Task()
				got := taskChange{id, status, strings.Join(keys, ",")}
				if got != w {
					t.Fatalf("frame %d is %+v, want %+v (commit order)", i, got, w)
				}
			}
			h.CancelListen(t, map[string]string{"1": o.SessionToken, `"o-2"`: o.SessionToken, "3": o.SessionToken,
				`"a"`: a.SessionToken, "5": a.SessionToken, "6": m.SessionToken}[f.s.ID], f.s.ID)

			f.s.ExpectFinal(t)
		})
	}
}

// openMany opens count listens for each session (in order), concurrently,
// each following uris, and returns them with their acknowledgements checked.
func openMany(t *testing.T, h *roomHarness, c *http.Client, sessions []party, perSession int, uris []string) []*stream {
	t.Helper()
	streams := make([]*stream, len(sessions)*perSession)
	et := collect(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range streams {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sess := sessions[i/perSession]
			id := fmt.Sprint(i)
			if i%2 == 1 {
				id = fmt.Sprintf(`"s-%d"`, i)
			}
			s, ack := h.Listen(et, c, sess.SessionToken, id, map[string]any{"resourceSubscriptions": uris}, false)
			if got := decodeStrings(et, ack["resourceSubscriptions"]); !slices.Equal(got, uris) {
				et.Errorf("stream %s acknowledged %v", id, got)
			}
			streams[i] = s
		})
	}
	wg.Wait()
	et.report(t)
	return streams
}

func TestListenThousandStreams(t *testing.T) {
	const sessions, perSession = 250, 4
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) {
		l.MaxLiveSessions = sessions + 10
		l.RateLimitPerMinute = 0
	}})
	c := streamClient()
	ss := h.joinMany(t, sessions, "read")
	doc := h.Eng.DocumentURI()
	streams := openMany(t, h, c, ss, perSession, []string{doc})
	if st := h.Hub.Stats(); st.Subscribers != sessions*perSession {
		t.Fatalf("hub has %d subscribers, want %d", st.Subscribers, sessions*perSession)
	}

	t.Run("all 1,000 streams receive one change", func(t *testing.T) {
		h.EditFile(t, ss[0].SessionToken, threeSections("hello everyone", "ship it\nsoon", "step one\nstep two\nstep three"))
		eachStream(t, streams, func(ctx context.Context, s *stream) error {
			f, err := s.NextCtx(ctx)
			if err != nil {
				return err
			}
			if f.Msg.Method != mcptest.ResourceMethod || f.URI() != doc || string(compactJSON(f.Meta()[mcptest.MetaSubscriptionID])) != s.ID || len(f.Dups) > 0 {
				return fmt.Errorf("%s: got %s, want resources/updated for the document", s.Name, f)
			}
			return nil
		})
		if st := h.Hub.Stats(); st.Dropped != 0 {
			t.Errorf("hub dropped %d subscribers: %+v", st.Dropped, st)
		}
	})

	t.Run("shutdown with 1,000 open streams ends every one with the final result", func(t *testing.T) {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			h.Hub.Close()
		}()
		eachStream(t, streams, func(ctx context.Context, s *stream) error {
			f, err := s.NextCtx(ctx)
			if err != nil {
				return err
			}
			if !f.IsFinal() || string(compactJSON(f.Msg.ID)) != s.ID || string(compactJSON(f.Meta()[mcptest.MetaSubscriptionID])) != s.ID {
				return fmt.Errorf("%s: got %s, want the final result", s.Name, f)
			}
			rest, err := s.EndCtx(ctx)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return fmt.Errorf("%s: frames after the final result: %v", s.Name, rest)
			}
			return nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), frameWait)
		defer cancel()
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("hub.Close did not return")
		}
		if st := h.Hub.Stats(); st.Ended != sessions*perSession || st.Subscribers != 0 {
			t.Errorf("after Close: %+v, want %d ended and none left", st, sessions*perSession)
		}
		s, r := h.ListenReq(t, c, ss[1].SessionToken, "99", map[string]any{"resourceSubscriptions": []string{doc}}, false)
		if s != nil || r.Status != http.StatusServiceUnavailable {
			t.Errorf("listen after the hub closed: stream %v, answer %+v; want 503 and no stream", s != nil, r)
		}
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			h.Stop()
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			t.Fatal("the servers did not shut down after the streams ended")
		}
	})
}

func TestListenStalledReaderIsDropped(t *testing.T) {
	// Each change puts a frame of at least 256 KiB on every stream: a
	// question on the next of many tasks, round after round (so no handoff
	// grows much). A reader that stops reading fills the kernel's socket
	// buffers (a few MiB on loopback), then its queue of 4; the next frame
	// drops it.
	const big, jobs, rounds = 256 << 10, 32, 8
	h := newHarness(t, "", harnessOpts{
		Limits: func(l *room.Limits) {
			l.MaxInputMessage = big
			l.MaxBodyBytes = 4 << 20
			l.MaxActiveTasks = jobs + 1
			l.MaxTasksPerParticipant = jobs + 1
			l.MaxOpenInputs = rounds + 1
			l.RateLimitPerMinute = 0
		},
		Hub:      listen.Config{QueueLen: 4},
		InMemory: true,
	})
	c := streamClient()
	b := h.NewBarrier(t, c)
	o := h.join("owner", "read", "propose")
	a := h.join("assignee", "read", "checkout")
	xs := make([]taskRef, jobs)
	var ids []string
	for i := range xs {
		xs[i] = h.newTask(t, o.SessionToken, fmt.Sprintf("big question %d", i))
		h.acceptTask(t, a.SessionToken, xs[i])
		ids = append(ids, xs[i].TaskID)
	}
	b.Wait(t)
	follow := map[string]any{"taskIds": ids}

	stalled, r := h.ListenReq(t, c, o.SessionToken, `"stalled"`, follow, true)
	if stalled == nil {
		t.Fatalf("listen refused: %d %s", r.Status, r.Raw)
	}
	healthy := []*stream{}
	for _, v := range []struct{ tok, id string }{{o.SessionToken, "1"}, {o.SessionToken, "2"}, {a.SessionToken, "3"}} {
		s, _ := h.Listen(t, c, v.tok, v.id, follow, true)
		healthy = append(healthy, s)
	}
	var sent []taskChange
	deliver := func(t *testing.T, want taskChange) {
		t.Helper()
		sent = append(sent, want)
		for _, s := range healthy {
			f := s.Next(t)
			s.Check(t, f, mcptest.TaskMethod)
			id, status, keys := f.Task()
			if got := (taskChange{id, status, strings.Join(keys, ",")}); got != want {
				t.Fatalf("%s got %+v, want %+v", s.Name, got, want)
			}
		}
	}

	t.Run("the stalled stream is dropped while the others receive every frame", func(t *testing.T) {
		question := strings.Repeat("?", big-1)
		i := 0
		for ; h.Hub.Stats().Dropped == 0; i++ {
			if i == jobs*rounds {
				t.Fatalf("no drop after %d frames of at least %d KiB: %+v", i, big>>10, h.Hub.Stats())
			}
			var keys []string // every question the task has open, as the frame lists them
			for r := range i/jobs + 1 {
				keys = append(keys, fmt.Sprintf("q%d", r))
			}
			slices.Sort(keys)
			// The HTTP twin of handoff_request_input: the same engine call,
			// with a body and an answer of one copy of the question each.
			wantOK(t, h.do("POST", h.IngressURL("/workspace/handoff/request_input"), a.SessionToken, map[string]any{
				"handoff_id": xs[i%jobs].HandoffID,
				"requests":   []any{map[string]any{"key": fmt.Sprintf("q%d", i/jobs), "message": question}}}))
			deliver(t, taskChange{xs[i%jobs].TaskID, room.TaskInputRequired, strings.Join(keys, ",")})
		}
		st := h.Hub.Stats()
		t.Logf("dropped after %d big frames: %+v", i, st)
		if st.Dropped != 1 || st.DroppedQueueFull+st.DroppedSlow != st.Dropped {
			t.Errorf("stats %+v, want exactly one drop, counted by cause", st)
		}
		if st.Subscribers != len(healthy)+1 {
			t.Errorf("%d subscribers left, want the %d healthy ones and the barrier", st.Subscribers, len(healthy))
		}
		// One more change still reaches everyone else.
		x := xs[i%jobs]
		h.askInput(t, a.SessionToken, x, "after", "still there?")
		f := h.getTask(t, a.SessionToken, x)
		var open []string
		for k := range f["inputRequests"].(map[string]any) {
			open = append(open, k)
		}
		slices.Sort(open)
		deliver(t, taskChange{x.TaskID, room.TaskInputRequired, strings.Join(open, ",")})
	})

	t.Run("the dropped stream ends without the final result, after a prefix of the frames", func(t *testing.T) {
		stalled.Start()
		frames := stalled.End(t)
		if len(frames) == 0 {
			t.Fatal("the stalled stream delivered nothing, not even the acknowledgement")
		}
		stalled.Check(t, frames[0], mcptest.AckMethod)
		for i, f := range frames[1:] {
			if f.IsFinal() {
				t.Fatalf("a dropped stream carried the final result (frame %d): %s", i+1, f)
			}
			stalled.Check(t, f, mcptest.TaskMethod)
			id, status, keys := f.Task()
			if got := (taskChange{id, status, strings.Join(keys, ",")}); i >= len(sent) || got != sent[i] {
				t.Fatalf("stalled frame %d is %+v, not the frame the others got", i+1, got)
			}
		}
		if len(frames)-1 >= len(sent) {
			t.Errorf("the stalled stream got all %d frames; it was not behind", len(sent))
		}
	})

	t.Run("the healthy streams still end gracefully", func(t *testing.T) {
		h.CancelListen(t, o.SessionToken, "1")
		healthy[0].ExpectFinal(t)
		if st := h.Hub.Stats(); st.Dropped != 1 {
			t.Errorf("stats %+v, want still one drop", st)
		}
	})
}

func TestListenReconnectGetsNothingFromTheGap(t *testing.T) {
	t.Run("listening again gets only changes after the new acknowledgement", func(t *testing.T) {
		h := newHarness(t, "")
		c := streamClient()
		b := h.NewBarrier(t, c)
		o := h.join("owner", "read", "propose")
		a := h.join("assignee", "read", "checkout")
		x := h.newTask(t, o.SessionToken, "gap test")
		h.acceptTask(t, a.SessionToken, x)
		b.Wait(t)
		follow := map[string]any{"taskIds": []string{x.TaskID}}
		// An observer that stays connected shows when each change was published.
		obs, _ := h.Listen(t, c, a.SessionToken, `"observer"`, follow, true)

		s, _ := h.Listen(t, c, o.SessionToken, "1", follow, true)
		h.askInput(t, a.SessionToken, x, "k1", "first?")
		s.ExpectTask(t, x.TaskID, room.TaskInputRequired)
		obs.ExpectTask(t, x.TaskID, room.TaskInputRequired)
		s.Close()

		// The gap: two changes while the owner is away.
		h.answerInput(t, o.SessionToken, x, "k1")
		obs.ExpectTask(t, x.TaskID, room.TaskWorking)
		h.askInput(t, a.SessionToken, x, "k2", "second?")
		obs.ExpectTask(t, x.TaskID, room.TaskInputRequired)

		s2, ack := h.Listen(t, c, o.SessionToken, "1", follow, true)
		if got := decodeStrings(t, ack["taskIds"]); !slices.Equal(got, []string{x.TaskID}) {
			t.Fatalf("acknowledged %v", got)
		}
		h.Clock.Advance(time.Second)
		h.completeTask(t, a.SessionToken, x, "done")
		f := s2.ExpectTask(t, x.TaskID, room.TaskCompleted)
		sameTask(t, f, h.getTask(t, o.SessionToken, x))
		obs.ExpectTask(t, x.TaskID, room.TaskCompleted)
		h.CancelListen(t, o.SessionToken, "1")
		s2.ExpectFinal(t)
	})

	t.Run("a change answered before the listen is not delivered after its acknowledgement", func(t *testing.T) {
		// The client had the answer to its change before it listened, so
		// that change is in the gap: the listen must not replay it. The
		// gate holds the batch between the writer and the hub for as long
		// as the test needs, which is what a busy scheduler can do.
		gate := &publishGate{}
		h := newHarness(t, "", harnessOpts{Gate: gate})
		c := streamClient()
		b := h.NewBarrier(t, c)
		o := h.join("owner", "read", "propose")
		a := h.join("assignee", "read", "checkout")
		x := h.newTask(t, o.SessionToken, "answered before listening")
		h.acceptTask(t, a.SessionToken, x)
		b.Wait(t)
		follow := map[string]any{"taskIds": []string{x.TaskID}}

		var once sync.Once
		release := func() { once.Do(func() { close(gate.release) }) }
		defer release()
		gate.arm()
		et := collect(t)
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			h.askInput(et, a.SessionToken, x, "gap", "asked before the owner listens")
		}()
		ctx, cancel := context.WithTimeout(context.Background(), frameWait)
		defer cancel()
		var repliedFirst bool
		select {
		case repliedFirst = <-gate.entered:
		case <-ctx.Done():
			t.Fatal("the change never reached the publisher")
		}
		if !repliedFirst {
			// The writer hands the change to the hub before answering: the
			// answer cannot come while the gate holds it.
			release()
		}
		select {
		case <-answered:
		case <-ctx.Done():
			t.Fatal("the change was never answered")
		}
		et.report(t)
		s, _ := h.Listen(t, c, o.SessionToken, "1", follow, true)
		release()
		h.Clock.Advance(time.Second)
		h.answerInput(t, o.SessionToken, x, "gap") // the first change after the acknowledgement
		f := s.Next(t)
		s.Check(t, f, mcptest.TaskMethod)
		if id, status, keys := f.Task(); status != room.TaskWorking {
			t.Fatalf("the first frame after the acknowledgement is %s %s %v: the change answered before the listen "+
				"(writer answered first: %v) was delivered to it; want only the later change (working)", id, status, keys, repliedFirst)
		}
		sameTask(t, f, h.getTask(t, o.SessionToken, x))
	})
}

func TestListenCancelledEndsTheStream(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	o := h.join("owner", "read", "propose")
	a := h.join("assignee", "read", "checkout")
	b := h.NewBarrier(t, c)
	x := h.newTask(t, o.SessionToken, "cancel test")
	h.acceptTask(t, a.SessionToken, x)
	follow := map[string]any{"taskIds": []string{x.TaskID}}
	n := 0
	change := func(t *testing.T) {
		t.Helper()
		n++
		h.askInput(t, a.SessionToken, x, fmt.Sprintf("c%d", n), "again?")
		h.answerInput(t, o.SessionToken, x, fmt.Sprintf("c%d", n))
	}
	expectChange := func(t *testing.T, s *stream) {
		t.Helper()
		s.ExpectTask(t, x.TaskID, room.TaskInputRequired)
		s.ExpectTask(t, x.TaskID, room.TaskWorking)
	}

	t.Run("notifications/cancelled from the same session ends it with the final result", func(t *testing.T) {
		b.Wait(t) // no earlier change is still on its way to the hub
		s, _ := h.Listen(t, c, o.SessionToken, "9", follow, true)
		ended := h.Hub.Stats().Ended
		h.CancelListen(t, o.SessionToken, "9")
		s.ExpectFinal(t)
		if st := h.Hub.Stats(); st.Ended != ended+1 {
			t.Errorf("Ended %d, want %d", st.Ended, ended+1)
		}
	})

	t.Run("the same id from another session does not end it", func(t *testing.T) {
		b.Wait(t) // no earlier change is still on its way to the hub
		s, _ := h.Listen(t, c, o.SessionToken, "10", follow, true)
		other, _ := h.Listen(t, c, a.SessionToken, "10", follow, true)
		h.CancelListen(t, a.SessionToken, "10")
		other.ExpectFinal(t) // the cancel was acted on, for its own session only
		change(t)
		expectChange(t, s)
		h.CancelListen(t, o.SessionToken, "10")
		s.ExpectFinal(t)
	})

	t.Run("a string id is not cancelled by the number with the same digits", func(t *testing.T) {
		b.Wait(t) // no earlier change is still on its way to the hub
		s, _ := h.Listen(t, c, o.SessionToken, `"11"`, follow, true)
		h.CancelListen(t, o.SessionToken, "11")
		change(t)
		expectChange(t, s)
		h.CancelListen(t, o.SessionToken, `"11"`)
		s.ExpectFinal(t)
	})

	t.Run("an id is cancelled by the same spelling even when it holds HTML characters", func(t *testing.T) {
		b.Wait(t)         // no earlier change is still on its way to the hub
		id := `"sub&<1>"` // JSON.stringify leaves &, < and > as they are
		s, _ := h.Listen(t, c, o.SessionToken, id, follow, true)
		h.CancelListen(t, o.SessionToken, id)
		change(t)
		f := s.Next(t)
		if !f.IsFinal() {
			t.Fatalf("notifications/cancelled naming %s did not end the listen %s; next frame %s", id, id, f)
		}
		s.CheckFinal(t, f)
	})

	t.Run("a cancel naming no open listen is accepted and changes nothing", func(t *testing.T) {
		b.Wait(t) // no earlier change is still on its way to the hub
		s, _ := h.Listen(t, c, o.SessionToken, "12", follow, true)
		h.CancelListen(t, o.SessionToken, "404")
		change(t)
		expectChange(t, s)
		h.CancelListen(t, o.SessionToken, "12")
		s.ExpectFinal(t)
	})
}

func TestListenSessionEndEndsItsStreams(t *testing.T) {
	doc := func(h *roomHarness) []string { return []string{h.Eng.DocumentURI()} }

	t.Run("leaving ends the session's streams with the final result, not others'", func(t *testing.T) {
		h := newHarness(t, "")
		c := streamClient()
		l := h.join("leaver", "read")
		k := h.join("keeper", "read")
		s1, _ := h.Listen(t, c, l.SessionToken, "1", map[string]any{"resourceSubscriptions": doc(h)}, false)
		s2, _ := h.Listen(t, c, l.SessionToken, `"two"`, map[string]any{"resourceSubscriptions": doc(h)}, false)
		sk, _ := h.Listen(t, c, k.SessionToken, "1", map[string]any{"resourceSubscriptions": doc(h)}, false)
		wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), l.SessionToken, map[string]any{}))
		s1.ExpectFinal(t)
		s2.ExpectFinal(t)
		h.EditFile(t, k.SessionToken, threeSections("hello again", "ship it\nsoon", "step one"))
		sk.ExpectRes(t, h.Eng.DocumentURI())
		if st := h.Hub.Stats(); st.Subscribers != 1 || st.Ended != 2 {
			t.Errorf("stats %+v, want the keeper's stream only and two ended", st)
		}
	})

	t.Run("expiry ends the expired session's streams, not others'", func(t *testing.T) {
		h := newHarness(t, "")
		c := streamClient()
		e := h.join("early", "read")
		// Opening a listen is the early session's last use: its expiry
		// slides from there (issue 16).
		se, _ := h.Listen(t, c, e.SessionToken, "1", map[string]any{"resourceSubscriptions": doc(h)}, false)
		h.Clock.Advance(4 * time.Hour)
		lt := h.join("late", "read")
		sl, _ := h.Listen(t, c, lt.SessionToken, "1", map[string]any{"resourceSubscriptions": doc(h)}, false)
		h.Clock.Advance(4*time.Hour + time.Minute) // past the early session's 8 idle hours
		h.Sweep()
		se.ExpectFinal(t)
		h.EditFile(t, lt.SessionToken, threeSections("hello later", "ship it\nsoon", "step one"))
		sl.ExpectRes(t, h.Eng.DocumentURI())
	})
}

func TestListenStreamLimitPerSession(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	s := h.join("busy", "read")
	other := h.join("other", "read")
	follow := map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}
	var open []*stream
	for i := range 4 {
		st, _ := h.Listen(t, c, s.SessionToken, fmt.Sprint(i), follow, false)
		open = append(open, st)
	}

	t.Run("a fifth concurrent listen is refused with an error, not a stream", func(t *testing.T) {
		st, r := h.ListenReq(t, c, s.SessionToken, "4", follow, false)
		if st != nil {
			t.Fatal("a fifth listen for one session opened a stream")
		}
		if r.Status < 400 || r.Error == nil || string(r.ID) != "4" {
			t.Fatalf("fifth listen: %d %s, want a JSON-RPC error for id 4", r.Status, r.Raw)
		}
		if r.Error.Data["error"] != "limit_exceeded" {
			t.Errorf("error data %v, want error limit_exceeded", r.Error.Data)
		}
		if h.Hub.Stats().Subscribers != 4 {
			t.Errorf("subscribers %d, want 4", h.Hub.Stats().Subscribers)
		}
	})

	t.Run("another session is not limited by it", func(t *testing.T) {
		h.Listen(t, c, other.SessionToken, "4", follow, false)
	})

	t.Run("after one ends, the session may listen again", func(t *testing.T) {
		h.CancelListen(t, s.SessionToken, "0")
		open[0].ExpectFinal(t)
		h.Listen(t, c, s.SessionToken, "5", follow, false)
	})
}
