package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// helpCommand is `ce help [COMMAND]`: the usage on stdout and exit 0, so
// `ce help serve | less` works, where -h writes to stderr as the flag
// package does.
func helpCommand(env Env, root *ffcli.Command) *ffcli.Command {
	fs := flag.NewFlagSet("ce help", flag.ContinueOnError)
	return &ffcli.Command{
		Name:       "help",
		ShortUsage: "ce help [COMMAND]",
		ShortHelp:  "print the commands, or one command's flags",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			switch len(args) {
			case 0:
				_, err := fmt.Fprint(env.Stdout, ffcli.DefaultUsageFunc(root))
				return err
			case 1:
				c := subcommand(root, args[0])
				if c == nil {
					return unknownCommand(root, args[0])
				}
				_, err := fmt.Fprint(env.Stdout, ffcli.DefaultUsageFunc(c))
				return err
			default:
				return &exitError{code: exitUsage, err: errors.New("help takes at most one command")}
			}
		},
	}
}

// subcommand is root's subcommand called name, or nil.
func subcommand(root *ffcli.Command, name string) *ffcli.Command {
	for _, c := range root.Subcommands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// servesAsFile says whether `ce WORD` means `ce serve WORD`: only for a file
// that exists or a name ending in .md. Anything else is a mistyped
// command, and serving it would create a document, a sidecar, a lock and
// an operator credential named after the typo.
func servesAsFile(word string) bool {
	if strings.HasSuffix(strings.ToLower(word), ".md") {
		return true
	}
	_, err := os.Stat(word)
	return err == nil
}

// unknownCommand is the usage error for a word that is no command, with
// the nearest command's name when one is close.
func unknownCommand(root *ffcli.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q", clipArg(word))
	if s := suggest(root, word); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	msg += "; `ce FILE` serves FILE only when it exists or ends in .md; `ce help` lists the commands"
	return &exitError{code: exitUsage, err: errors.New(msg)}
}

// clipArg bounds an argument echoed in a message.
func clipArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// suggest is the command nearest to word: the shortest command it is a
// prefix of, else the first within two edits (a swap of neighbours counting
// as one), else "".
func suggest(root *ffcli.Command, word string) string {
	prefix := ""
	best, bestD := "", 3
	for _, c := range root.Subcommands {
		if len(word) >= 2 && strings.HasPrefix(c.Name, word) && (prefix == "" || len(c.Name) < len(prefix)) {
			prefix = c.Name
		}
		if d := editDistance(word, c.Name); d < bestD && d < len(word) {
			best, bestD = c.Name, d
		}
	}
	if prefix != "" {
		return prefix
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of neighbours,
// each costing one. Command names are short, so the full table is fine.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
