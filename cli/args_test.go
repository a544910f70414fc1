package cli

// Unit tests, in-process (no binary): argument rewriting and exit codes.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

func quietEnv() Env { return Env{Stdout: io.Discard, Stderr: io.Discard} }

func TestPermute(t *testing.T) {
	env := quietEnv()
	serveFS := serveCommand(env).FlagSet
	joinFS := joinCommand(env).FlagSet
	inviteFS := inviteCommand(env).FlagSet
	for _, tc := range []struct {
		name string
		fs   *flag.FlagSet
		in   []string
		want []string
	}{
		{"empty_stays_empty", serveFS, nil, nil},
		{"positional_only_unchanged", serveFS, []string{"notes.md"}, []string{"notes.md"}},
		{"bool_flag_after_file_moves_first", serveFS, []string{"notes.md", "--json"}, []string{"--json", "notes.md"}},
		{"single_dash_bool_moves_first", serveFS, []string{"notes.md", "-json"}, []string{"-json", "notes.md"}},
		{"bool_with_value_moves_as_one", serveFS, []string{"notes.md", "--json=false"}, []string{"--json=false", "notes.md"}},
		{"value_flag_moves_with_its_value", serveFS,
			[]string{"notes.md", "--addr", "127.0.0.1:0", "--json"},
			[]string{"--addr", "127.0.0.1:0", "--json", "notes.md"}},
		{"value_flag_with_equals_moves_as_one", serveFS,
			[]string{"notes.md", "--ingress-addr=127.0.0.1:0"},
			[]string{"--ingress-addr=127.0.0.1:0", "notes.md"}},
		{"value_starting_with_dash_stays_the_value", serveFS,
			[]string{"notes.md", "--name", "-bob"},
			[]string{"--name", "-bob", "notes.md"}},
		{"flags_already_first_unchanged", serveFS,
			[]string{"--json", "--addr", "127.0.0.1:0", "notes.md"},
			[]string{"--json", "--addr", "127.0.0.1:0", "notes.md"}},
		{"lone_dash_is_positional", serveFS, []string{"-", "--json"}, []string{"--json", "-"}},
		{"unknown_flag_kept_for_the_parser", serveFS,
			[]string{"notes.md", "--bogus", "x"},
			[]string{"--bogus", "notes.md", "x"}},
		{"double_dash_keeps_dash_file_positional", serveFS,
			[]string{"--json", "--", "-weird.md"},
			[]string{"--json", "--", "-weird.md"}},
		{"double_dash_after_positionals_keeps_them_positional", serveFS,
			[]string{"a.md", "--json", "--", "--addr"},
			[]string{"--json", "--", "a.md", "--addr"}},
		{"join_uri_then_flags", joinFS,
			[]string{"commonroom://join/abc", "--name", "bot", "--kind", "human", "--json"},
			[]string{"--name", "bot", "--kind", "human", "--json", "commonroom://join/abc"}},
		{"negative_number_is_a_value", inviteFS,
			[]string{"--workspace", "n.md", "--max-uses", "-1", "--json"},
			[]string{"--workspace", "n.md", "--max-uses", "-1", "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := permute(tc.fs, in)
			if !slices.Equal(got, tc.want) {
				t.Errorf("permute(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("permute modified its input: %q", in)
			}
		})
	}
}

// TestPermuteParses: what permute returns parses to the values the user
// meant, whatever the order they were typed in.
func TestPermuteParses(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
	}{
		{"flags_after_file", []string{"notes.md", "--json", "--addr", "127.0.0.1:9", "--name=host"}},
		{"flags_around_file", []string{"--json", "notes.md", "--addr", "127.0.0.1:9", "--name", "host"}},
		{"flags_before_file", []string{"--name", "host", "--addr=127.0.0.1:9", "-json", "notes.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := serveCommand(quietEnv())
			if err := cmd.FlagSet.Parse(permute(cmd.FlagSet, tc.in)); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			cmd.FlagSet.Visit(func(f *flag.Flag) { got[f.Name] = f.Value.String() })
			want := map[string]string{"json": "true", "addr": "127.0.0.1:9", "name": "host"}
			if !maps.Equal(got, want) {
				t.Errorf("flags = %v, want %v", got, want)
			}
			if args := cmd.FlagSet.Args(); !slices.Equal(args, []string{"notes.md"}) {
				t.Errorf("positionals = %q", args)
			}
		})
	}
}

func TestRewriteArgs(t *testing.T) {
	const uri = "commonroom://join/abc"
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"no_args_unchanged", nil, nil},
		{"bare_file_is_serve", []string{"notes.md"}, []string{"serve", "notes.md"}},
		{"bare_file_with_flags_is_serve", []string{"notes.md", "--json"}, []string{"serve", "--json", "notes.md"}},
		{"bare_path_in_subdir_is_serve", []string{"a/b/notes.md", "--addr", "127.0.0.1:0"},
			[]string{"serve", "--addr", "127.0.0.1:0", "a/b/notes.md"}},
		{"serve_flags_after_file_move", []string{"serve", "notes.md", "--json"}, []string{"serve", "--json", "notes.md"}},
		{"status_unchanged", []string{"status", "--workspace", "n.md", "--json"}, []string{"status", "--workspace", "n.md", "--json"}},
		{"invite_negative_value_unchanged", []string{"invite", "--max-uses", "-1"}, []string{"invite", "--max-uses", "-1"}},
		{"join_flags_after_uri_move", []string{"join", uri, "--name", "bot", "--json"}, []string{"join", "--name", "bot", "--json", uri}},
		{"root_flag_first_unchanged", []string{"--help"}, []string{"--help"}},
		{"root_flag_then_words_unchanged", []string{"-h", "notes.md"}, []string{"-h", "notes.md"}},
		{"bare_md_name_in_any_case_is_serve", []string{"Notes.MD"}, []string{"serve", "Notes.MD"}},
		{"help_is_a_command", []string{"help", "serve"}, []string{"help", "serve"}},
		{"version_is_a_command", []string{"version", "--json"}, []string{"version", "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := rootCommand(quietEnv())
			got, err := rewriteArgs(root, slices.Clone(tc.in))
			if err != nil {
				t.Fatalf("rewriteArgs(%q): %v", tc.in, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rewriteArgs(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestExitCode covers every Kind the CLI maps, plus the non-domain errors.
func TestExitCode(t *testing.T) {
	kinds := map[room.Kind]int{
		room.KindInvalidRequest:       2,
		room.KindInvalidRegion:        2,
		room.KindUnsupportedVersion:   2,
		room.KindUnauthorized:         3,
		room.KindSessionExpired:       3,
		room.KindPermissionDenied:     3,
		room.KindInvitationExpired:    3,
		room.KindInvitationRevoked:    3,
		room.KindInvitationRedeemed:   3,
		room.KindNotFound:             4,
		room.KindHandoffNotFound:      4,
		room.KindTaskNotFound:         4,
		room.KindProposalNotFound:     4,
		room.KindVersionNotFound:      4,
		room.KindLeaseConflict:        5,
		room.KindStaleVersion:         5,
		room.KindProposalConflict:     5,
		room.KindHandoffConflict:      5,
		room.KindLimitExceeded:        6,
		room.KindBodyTooLarge:         6,
		room.KindOverloaded:           7,
		room.KindUnavailable:          7,
		room.KindRoomBusy:             7,
		room.KindTransportUnavailable: 7,
		room.KindInternal:             1,
	}
	for _, k := range slices.Sorted(maps.Keys(exitCodes)) {
		if _, ok := kinds[k]; !ok {
			t.Errorf("exitCodes maps %q, which this test does not cover", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		want := kinds[k]
		t.Run(string(k)+"_exits_"+fmt.Sprint(want), func(t *testing.T) {
			if _, ok := exitCodes[k]; !ok {
				t.Errorf("%q is missing from exitCodes", k)
			}
			err := room.Errorf(k, "boom")
			if got := ExitCode(err); got != want {
				t.Errorf("ExitCode(%s) = %d, want %d", k, got, want)
			}
			if got := ExitCode(fmt.Errorf("context: %w", err)); got != want {
				t.Errorf("ExitCode(wrapped %s) = %d, want %d", k, got, want)
			}
			// What a remote room sends back maps the same way.
			body := fmt.Sprintf(`{"error":%q,"message":"m"}`, k)
			if got := ExitCode(remoteError(400, []byte(body))); got != want {
				t.Errorf("ExitCode(remote %s) = %d, want %d", k, got, want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil_exits_0", nil, 0},
		{"exit_error_keeps_its_code", &exitError{code: 5, err: errors.New("x")}, 5},
		{"wrapped_exit_error_keeps_its_code", fmt.Errorf("ctx: %w", &exitError{code: 6, err: errors.New("x")}), 6},
		{"help_exits_2", flag.ErrHelp, 2},
		{"plain_error_exits_1", errors.New("disk on fire"), 1},
		{"unknown_kind_exits_1", room.Errorf(room.Kind("brand_new"), "?"), 1},
		{"internal_with_cause_exits_1", room.Internal(errors.New("sql")), 1},
		{"remote_non_json_exits_1", remoteError(502, []byte("<html>")), 1},
		{"remote_without_code_exits_1", remoteError(500, []byte(`{"message":"m"}`)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// TestRemoteErrorKeepsRecoveryFields: an error from the owner listener comes
// back as the room's own error, recovery fields included.
func TestRemoteErrorKeepsRecoveryFields(t *testing.T) {
	err := remoteError(409, []byte(`{"error":"stale_version","message":"behind","current_version":7}`))
	var e *room.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a room error: %v", err)
	}
	if e.Kind != room.KindStaleVersion || e.Message != "behind" || e.Fields["current_version"] != float64(7) {
		t.Errorf("got %+v", e)
	}
}

// TestUnknownWordsAreNotServed: a word that is no command, no existing file
// and no .md name is a usage error with the nearest command, never a room
// named after a typo.
func TestUnknownWordsAreNotServed(t *testing.T) {
	for _, tc := range []struct {
		word, suggestion string
	}{
		{"stauts", "status"},
		{"verison", "version"},
		{"hand", "handoff"},
		{"invitse", "invite"}, // as near to invites: the first listed wins
		{"handoffs-events", "handoff-events"},
		{"xyzzy", ""},
		{"version.txt", ""},
	} {
		t.Run(tc.word, func(t *testing.T) {
			_, err := rewriteArgs(rootCommand(quietEnv()), []string{tc.word})
			if err == nil {
				t.Fatalf("rewriteArgs(%q) took it for a file to serve", tc.word)
			}
			if ExitCode(err) != exitUsage {
				t.Errorf("exit %d, want %d", ExitCode(err), exitUsage)
			}
			msg := err.Error()
			switch {
			case !strings.Contains(msg, `unknown command "`+tc.word+`"`):
				t.Errorf("message %q does not name the word", msg)
			case tc.suggestion != "" && !strings.Contains(msg, `did you mean "`+tc.suggestion+`"`):
				t.Errorf("message %q does not suggest %q", msg, tc.suggestion)
			case tc.suggestion == "" && strings.Contains(msg, "did you mean"):
				t.Errorf("message %q suggests something for a word near nothing", msg)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"status", "status", 0},
		{"stauts", "status", 1}, // one swap of neighbours
		{"stats", "status", 1},
		{"serv", "serve", 1},
		{"", "join", 4},
		{"abc", "xyz", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
