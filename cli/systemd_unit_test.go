package cli

// The systemd unit shipped in contrib/systemd (issue 29 item 2): hardened,
// writable only where the room writes, and starting `ce serve` with flags
// this build knows. No systemd is needed: the unit is read as text.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const unitPath = "../contrib/systemd/ce.service"

// unitKeys reads a unit's [Service] and other sections as key → values, in
// order (a key may repeat), comments and blank lines skipped.
func unitKeys(text string) map[string][]string {
	keys := map[string][]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			keys[k] = append(keys[k], v)
		}
	}
	return keys
}

// unitProblems says what keeps text from being the unit the README
// documents: a key missing or too weak, a path that does not match.
func unitProblems(text string) []string {
	keys := unitKeys(text)
	var probs []string
	one := func(k string) string {
		if v := keys[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	for k, want := range map[string]string{
		"ProtectSystem":   "strict",
		"NoNewPrivileges": "yes",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
		"Restart":         "on-failure",
		// The banner holds a one-use invitation and the owner page's key.
		"StandardOutput": "null",
	} {
		if got := one(k); got != want {
			probs = append(probs, fmt.Sprintf("%s=%q, want %q", k, got, want))
		}
	}
	if u := one("User"); u == "" || u == "root" || u == "0" {
		probs = append(probs, fmt.Sprintf("User=%q: the room must not run as root", u))
	}
	fams := strings.Fields(one("RestrictAddressFamilies"))
	for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6"} {
		if !slices.Contains(fams, f) {
			probs = append(probs, "RestrictAddressFamilies lacks "+f)
		}
	}
	if len(keys["ExecStart"]) != 1 {
		return append(probs, fmt.Sprintf("%d ExecStart lines, want 1", len(keys["ExecStart"])))
	}
	args := strings.Fields(one("ExecStart"))
	if len(args) < 3 || args[0] != "/usr/local/bin/ce" || args[1] != "serve" {
		return append(probs, fmt.Sprintf("ExecStart=%q does not run /usr/local/bin/ce serve", one("ExecStart")))
	}
	fs := serveCommand(quietEnv()).FlagSet
	if err := fs.Parse(permute(fs, args[2:])); err != nil {
		return append(probs, fmt.Sprintf("ExecStart: ce serve refuses its flags: %v", err))
	}
	if fs.NArg() != 1 || !filepath.IsAbs(fs.Arg(0)) {
		return append(probs, fmt.Sprintf("ExecStart serves %q, want one absolute document", fs.Args()))
	}
	// The sidecar, lock, operator credential and transport state are
	// written beside the document, and nothing is written anywhere else.
	if rw, dir := keys["ReadWritePaths"], filepath.Dir(fs.Arg(0)); !slices.Equal(rw, []string{dir}) {
		probs = append(probs, fmt.Sprintf("ReadWritePaths=%q, want only the document's directory %q", rw, dir))
	}
	return probs
}

func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(b)
	edit := func(old, new string) string {
		if !strings.Contains(shipped, old) {
			t.Fatalf("the unit has no %q to change", old)
		}
		return strings.Replace(shipped, old, new, 1)
	}
	cases := []struct {
		name, unit, wantProblem string
	}{
		{"shipped_unit_is_hardened", shipped, ""},
		{"protect_system_full_is_too_weak", edit("ProtectSystem=strict", "ProtectSystem=full"), "ProtectSystem"},
		{"no_new_privileges_missing_is_refused", edit("NoNewPrivileges=yes\n", ""), "NoNewPrivileges"},
		{"root_user_is_refused", edit("User=ce", "User=root"), "User="},
		{"banner_to_the_journal_is_refused", edit("StandardOutput=null", "StandardOutput=journal"), "StandardOutput"},
		{"writable_path_other_than_the_documents_is_refused", edit("ReadWritePaths=/srv/notes", "ReadWritePaths=/srv"), "ReadWritePaths"},
		{"unknown_serve_flag_is_refused", edit("--log-level info\n", "--log-levle info\n"), "refuses its flags"},
		{"relative_document_is_refused", edit("serve /srv/notes/notes.md --log", "serve notes.md --log"), "absolute"},
		{"no_inet6_is_refused", edit("AF_INET6 ", ""), "AF_INET6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probs := unitProblems(c.unit)
			switch {
			case c.wantProblem == "" && len(probs) > 0:
				t.Fatalf("problems: %q", probs)
			case c.wantProblem != "" && !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, c.wantProblem) }):
				t.Fatalf("no problem naming %q in %q", c.wantProblem, probs)
			}
		})
	}
}
