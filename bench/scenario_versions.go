package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The versions scenario measures what keeping a document's history costs:
// a generated Markdown document of about 1 MiB in many sections, N commits
// each changing one line of one section through the real MCP door (a raw
// section commit, workspace_commit with base_version, target and content,
// as an admin session makes it), and the sidecar's growth per commit with
// the WAL folded in. It also reads the room's resident memory after it
// opened the document and after it picked up an outside edit (a line
// appended to the file, until the room has recorded it as a version),
// with the peak (VmHWM) beside each, since a large document's cost shows
// as a peak while it is read and diffed.

// versionsDocBytes is the size of the generated document.
const versionsDocBytes = 1 << 20

// versionsLinesPerSection keeps each section about 1 KiB.
const versionsLinesPerSection = 15

// versionsTarget names the goal in the targets table.
const versionsTarget = "sidecar growth per one-line commit, 1 MiB document (KiB)"

type versionsResult struct {
	DocumentBytes int     `json:"document_bytes"`
	Sections      int     `json:"sections"`
	Commits       int     `json:"commits"`
	CommitLatency latency `json:"commit_latency"`
	// SidecarBefore/AfterBytes are db + wal with the room stopped and the
	// WAL folded into the db by a TRUNCATE checkpoint (see Checkpoint).
	SidecarBeforeBytes int64   `json:"sidecar_before_bytes"`
	SidecarAfterBytes  int64   `json:"sidecar_after_bytes"`
	GrowthPerCommitKB  float64 `json:"sidecar_growth_per_commit_kb"`
	Checkpoint         string  `json:"checkpoint"`
	// The room's memory (VmRSS, and the peak VmHWM of the process so far).
	RSSAfterOpenKB    int64   `json:"rss_after_open_kb"`
	PeakAfterOpenKB   int64   `json:"peak_rss_after_open_kb"`
	RSSBeforeEditKB   int64   `json:"rss_before_outside_edit_kb"` // the room serving the document again, after the commits
	RSSAfterEditKB    int64   `json:"rss_after_outside_edit_kb"`
	PeakAfterEditKB   int64   `json:"peak_rss_after_outside_edit_kb"`
	EditRecordSeconds float64 `json:"outside_edit_recorded_seconds"`
}

// versionsDoc is the generated document, kept section by section so each
// commit can send its section's new text.
type versionsDoc struct {
	head     string
	sections [][]string // per section: its lines (heading, blank, body lines)
}

func newVersionsDoc(size int) *versionsDoc {
	d := &versionsDoc{head: "# Versions bench\n\nA generated document for `go run ./bench --scenarios versions`.\n\n"}
	n := len(d.head)
	for k := 1; n < size; k++ {
		lines := []string{fmt.Sprintf("## Section %05d", k), ""}
		for j := 1; j <= versionsLinesPerSection; j++ {
			lines = append(lines, fmt.Sprintf("Line %02d of section %05d: the quick brown fox jumps over the lazy dog, again.", j, k))
		}
		lines = append(lines, "")
		d.sections = append(d.sections, lines)
		n += len(d.section(k - 1))
	}
	return d
}

func (d *versionsDoc) title(i int) string { return strings.TrimPrefix(d.sections[i][0], "## ") }

// section is section i's region: its heading line through the blank line
// before the next heading.
func (d *versionsDoc) section(i int) string { return strings.Join(d.sections[i], "\n") + "\n" }

func (d *versionsDoc) text() string {
	var b strings.Builder
	b.WriteString(d.head)
	for i := range d.sections {
		b.WriteString(d.section(i))
	}
	return b.String()
}

func scenarioVersions(ctx context.Context, e *env) error {
	if e.bin == "" {
		return errors.New("versions needs a room of its own, but no ce binary was built")
	}
	commits := e.cfg.versionsCommits
	e.mu.Lock()
	e.seq++
	dir := filepath.Join(e.workDir, fmt.Sprintf("%02d-versions", e.seq))
	e.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := newVersionsDoc(versionsDocBytes)
	file := filepath.Join(dir, "big.md")
	text := doc.text()
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return err
	}
	res := &versionsResult{DocumentBytes: len(text), Sections: len(doc.sections), Commits: commits,
		Checkpoint: "db + wal with the room stopped, after PRAGMA wal_checkpoint(TRUNCATE)"}
	logPath := filepath.Join(dir, "big.ce.log")
	e.waitQuiet(ctx, "versions")

	// 1. Open the document: the room reads it and stores its first version.
	e.logf("versions: serving a %d KiB document of %d sections", len(text)>>10, len(doc.sections))
	c, err := e.track(serveCE(ctx, e.bin, file, logPath))
	if err != nil {
		return err
	}
	rc := newRoomClient(c, 2)
	admin, err := versionsAdmin(ctx, rc)
	if err != nil {
		rc.close()
		return err
	}
	version, err := workspaceVersion(ctx, admin)
	rc.close()
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	if res.RSSAfterOpenKB, res.PeakAfterOpenKB, err = c.memKB(); err != nil {
		return err
	}
	if res.SidecarBeforeBytes, err = stopAndFold(ctx, e, c); err != nil {
		return err
	}

	// 2. N one-line commits, each to one section, through /mcp.
	if c, err = e.serveAgain(ctx, c); err != nil {
		return err
	}
	rc = newRoomClient(c, 2)
	if admin, err = versionsAdmin(ctx, rc); err != nil {
		rc.close()
		return err
	}
	e.logf("versions: %d one-line commits", commits)
	var h hist
	for i := range commits {
		k := (i * 37) % len(doc.sections)
		j := 2 + i%versionsLinesPerSection
		doc.sections[k][j] = fmt.Sprintf("Line %02d of section %05d, changed by commit %d of the bench.", j-1, k+1, i+1)
		t0 := time.Now()
		tr, err := admin.tool(ctx, "workspace_commit", map[string]any{"base_version": version,
			"summary": fmt.Sprintf("bench: one line of %s", doc.title(k)), "target": doc.title(k), "content": doc.section(k)})
		if err != nil {
			rc.close()
			return fmt.Errorf("commit %d: %w", i+1, err)
		}
		h.add(time.Since(t0))
		var cr struct {
			Version int64 `json:"version"`
		}
		if err := json.Unmarshal(tr.StructuredContent, &cr); err != nil || cr.Version != version+1 {
			rc.close()
			return fmt.Errorf("commit %d: version %d after %d (%v): %s", i+1, cr.Version, version, err, clip(tr.StructuredContent))
		}
		version = cr.Version
	}
	rc.close()
	res.CommitLatency = h.summary()
	if got, err := os.ReadFile(file); err != nil {
		return err
	} else if string(got) != doc.text() {
		e.rep.violation(fmt.Sprintf("versions: after %d section commits the file is not the document committed (%d bytes, want %d)", commits, len(got), len(doc.text())))
	}
	if res.SidecarAfterBytes, err = stopAndFold(ctx, e, c); err != nil {
		return err
	}
	if commits > 0 {
		res.GrowthPerCommitKB = float64(res.SidecarAfterBytes-res.SidecarBeforeBytes) / 1024 / float64(commits)
	}

	// 3. An outside edit of the served document.
	if c, err = e.serveAgain(ctx, c); err != nil {
		return err
	}
	defer e.release(c)
	rc = newRoomClient(c, 2)
	defer rc.close()
	if admin, err = versionsAdmin(ctx, rc); err != nil {
		return err
	}
	if version, err = workspaceVersion(ctx, admin); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	if res.RSSBeforeEditKB, _, err = c.memKB(); err != nil {
		return err
	}
	e.logf("versions: appending a line to the file outside the room")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\nA line appended outside the room.\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	t0 := time.Now()
	for {
		v, err := workspaceVersion(ctx, admin)
		if err != nil {
			return err
		}
		if v > version {
			break
		}
		if time.Since(t0) > time.Minute {
			e.rep.violation("versions: an outside edit of the document was not recorded as a version within 1 minute")
			break
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	res.EditRecordSeconds = time.Since(t0).Seconds()
	time.Sleep(200 * time.Millisecond)
	if res.RSSAfterEditKB, res.PeakAfterEditKB, err = c.memKB(); err != nil {
		return err
	}
	e.rep.mu.Lock()
	e.rep.Versions = res
	e.rep.mu.Unlock()
	e.rep.printVersions()
	return ctx.Err()
}

// versionsAdmin joins one session that may commit raw content.
func versionsAdmin(ctx context.Context, rc *roomClient) (*mcpClient, error) {
	ss, err := rc.sessions(ctx, "versions-admin", 1, "read", "admin")
	if err != nil {
		return nil, err
	}
	return rc.mcp(ss[0]), nil
}

// workspaceVersion is the document's current version (workspace_status).
func workspaceVersion(ctx context.Context, mc *mcpClient) (int64, error) {
	tr, err := mc.tool(ctx, "workspace_status", map[string]any{})
	if err != nil {
		return 0, err
	}
	var st struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(tr.StructuredContent, &st); err != nil || st.Version < 1 {
		return 0, fmt.Errorf("workspace_status without a version (%v): %s", err, clip(tr.StructuredContent))
	}
	return st.Version, nil
}

// stopAndFold stops the room, folds its WAL into the db with a TRUNCATE
// checkpoint of its own (ce has no checkpoint call; stopped, nothing else
// holds the file), and returns db + wal in bytes.
func stopAndFold(ctx context.Context, e *env, c *ceServer) (int64, error) {
	if err := c.stop(); err != nil {
		return 0, fmt.Errorf("stopping the room: %v (log: %s)", err, tail(c.logPath))
	}
	path := c.file + ".commonroom.db"
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, err
	}
	var busy, logPages, ckpt int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &ckpt)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("checkpointing the sidecar: %w", err)
	}
	if busy != 0 {
		return 0, errors.New("checkpointing the sidecar: busy, with the room stopped")
	}
	var size int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			size += st.Size()
		}
	}
	return size, nil
}

func (r *report) printVersions() {
	v := r.Versions
	r.header(fmt.Sprintf("versions (a %s KiB document, %d one-line commits)", num(float64(v.DocumentBytes)/1024), v.Commits))
	r.row("versions", "sidecar growth per one-line commit", fmt.Sprintf("%s KiB", num(v.GrowthPerCommitKB)),
		fmt.Sprintf("%s → %s MiB over %d commits to %d sections; %s", num(float64(v.SidecarBeforeBytes)/(1<<20)),
			num(float64(v.SidecarAfterBytes)/(1<<20)), v.Commits, v.Sections, v.Checkpoint))
	r.row("versions", "  workspace_commit p50 / p99", lat(v.CommitLatency), "a raw section commit by an admin session")
	r.row("versions", "room RSS after opening the document", fmt.Sprintf("%s MiB", num(float64(v.RSSAfterOpenKB)/1024)),
		fmt.Sprintf("peak %s MiB", num(float64(v.PeakAfterOpenKB)/1024)))
	r.row("versions", "room RSS after an outside edit", fmt.Sprintf("%s MiB", num(float64(v.RSSAfterEditKB)/1024)),
		fmt.Sprintf("peak %s MiB; %s MiB before it (served again after the commits); a version %.1fs after the append (workspace_status makes the room look at the file)",
			num(float64(v.PeakAfterEditKB)/1024), num(float64(v.RSSBeforeEditKB)/1024), v.EditRecordSeconds))
}

func (r *report) judgeVersions(add func(name, goal string, measured float64, ok, have bool, detail string)) {
	v := r.Versions
	if v == nil || v.Commits == 0 {
		add(versionsTarget, "≤ 16", 0, false, false, "versions not run")
		return
	}
	add(versionsTarget, "≤ 16", v.GrowthPerCommitKB, v.GrowthPerCommitKB <= 16, true,
		fmt.Sprintf("%d commits to a %s KiB document, WAL folded in", v.Commits, num(float64(v.DocumentBytes)/1024)))
}
