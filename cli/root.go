// Package cli is the `ce` command line: every subcommand, its flags (flag >
// environment CE_* > config file) and its output, text or --json, written to
// injected writers so tests run the real commands in-process or as a binary.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// Env is everything a command touches outside its arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Signals delivers interrupt requests to `ce serve`: the first stops it
	// gracefully, the second forces an exit.
	Signals <-chan os.Signal
	// Exit ends the process at once (the second signal). Tests replace it.
	Exit func(int)
	// Transports are the transport plugins `ce serve --transport` and
	// `ce join` may use; nil means loopback only. The program's main
	// registers the built-in ones.
	Transports *transport.Registry
}

// exitError carries an exit code through ffcli.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes, one per family of error kinds, so scripts can branch on them.
const (
	exitOK       = 0
	exitInternal = 1
	exitUsage    = 2
	exitAuth     = 3
	exitNotFound = 4
	exitConflict = 5
	exitLimit    = 6
	exitBusy     = 7
)

var exitCodes = map[room.Kind]int{
	room.KindInvalidRequest:       exitUsage,
	room.KindInvalidRegion:        exitUsage,
	room.KindUnsupportedVersion:   exitUsage,
	room.KindUnauthorized:         exitAuth,
	room.KindSessionExpired:       exitAuth,
	room.KindPermissionDenied:     exitAuth,
	room.KindInvitationExpired:    exitAuth,
	room.KindInvitationRevoked:    exitAuth,
	room.KindInvitationRedeemed:   exitAuth,
	room.KindNotFound:             exitNotFound,
	room.KindHandoffNotFound:      exitNotFound,
	room.KindTaskNotFound:         exitNotFound,
	room.KindProposalNotFound:     exitNotFound,
	room.KindVersionNotFound:      exitNotFound,
	room.KindLeaseConflict:        exitConflict,
	room.KindStaleVersion:         exitConflict,
	room.KindProposalConflict:     exitConflict,
	room.KindHandoffConflict:      exitConflict,
	room.KindLimitExceeded:        exitLimit,
	room.KindBodyTooLarge:         exitLimit,
	room.KindOverloaded:           exitBusy,
	room.KindUnavailable:          exitBusy,
	room.KindRoomBusy:             exitBusy,
	room.KindTransportUnavailable: exitBusy,
	room.KindInternal:             exitInternal,
}

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitUsage
	}
	if c, ok := exitCodes[room.ErrorKind(err)]; ok {
		return c
	}
	return exitInternal
}

// Main runs `ce` with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Exit == nil {
		env.Exit = os.Exit
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	root := rootCommand(env)
	args, err := rewriteArgs(root, args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "ce: %v\n", err)
		return ExitCode(err)
	}
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(env.Stderr, "ce: %v\n", err)
		return exitUsage
	}
	err = root.Run(ctx)
	if err != nil && !errors.Is(err, errReported) {
		if errors.Is(err, flag.ErrHelp) {
			return exitUsage
		}
		fmt.Fprintf(env.Stderr, "ce: %s\n", message(err))
	}
	return ExitCode(err)
}

// errReported marks an error whose output the command already wrote.
var errReported = errors.New("reported")

// message is what the user reads: the stable code first (scripts and people
// can search for it), then the explanation.
func message(err error) string {
	var e *room.Error
	if errors.As(err, &e) {
		return string(e.Kind) + ": " + e.Message
	}
	return err.Error()
}

func rootCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	showVersion := fs.Bool("version", false, "print ce's version and exit")
	var root *ffcli.Command
	root = &ffcli.Command{
		Name:       "ce",
		ShortUsage: "ce <command> [flags] [args]   (ce FILE is short for ce serve FILE, for a FILE that exists or ends in .md)",
		ShortHelp:  "Commonroom: a shared room around a Markdown file",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if *showVersion {
				return printVersion(env, false)
			}
			if len(args) > 0 {
				return unknownCommand(root, args[0])
			}
			return flag.ErrHelp
		},
	}
	root.Subcommands = []*ffcli.Command{
		serveCommand(env),
		inviteCommand(env),
		joinCommand(env),
		pageCommand(env),
		callCommand(env),
		mcpCommand(env),
		statusCommand(env),
		handoffsCommand(env),
		handoffCommand(env),
		handoffEventsCommand(env),
		taskCommand(env),
		taskCancelCommand(env),
		cancelHandoffsCommand(env),
		participantsCommand(env),
		leasesCommand(env),
		proposalsCommand(env),
		proposalCommand(env),
		historyCommand(env),
		diffCommand(env),
		openCommand(env),
		endSessionCommand(env),
		revokeCommand(env),
		invitesCommand(env),
		approveCommand(env),
		rejectCommand(env),
		commitCommand(env),
		answerCommand(env),
		inboxCommand(env),
		backupCommand(env),
		compactCommand(env),
		versionCommand(env),
	}
	root.Subcommands = append(root.Subcommands, helpCommand(env, root))
	for _, c := range root.Subcommands {
		workspaceDefault(c)
		c.FlagSet.SetOutput(env.Stderr)
		c.FlagSet.String("config", "", "read flags from this file (lines of `flag value`)")
		c.Options = append(c.Options,
			ff.WithEnvVarPrefix("CE"),
			ff.WithConfigFileFlag("config"),
			ff.WithConfigFileParser(ff.PlainParser),
			ff.WithAllowMissingConfigFile(false))
	}
	return root
}

// rewriteArgs reads `ce FILE` as `ce serve FILE` (for a FILE that exists or
// ends in .md; any other word is an unknown command), and moves a
// subcommand's flags in front of its positional arguments so
// `ce serve notes.md --json` works (the standard flag package stops at the
// first positional argument).
func rewriteArgs(root *ffcli.Command, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	sub := subcommand(root, args[0])
	if sub == nil {
		if strings.HasPrefix(args[0], "-") {
			return args, nil
		}
		if !servesAsFile(args[0]) {
			return nil, unknownCommand(root, args[0])
		}
		args = append([]string{"serve"}, args...)
		sub = root.Subcommands[0]
	}
	return append([]string{args[0]}, permute(sub.FlagSet, args[1:])...), nil
}

// permute returns args with every flag (and its value) before the positionals.
func permute(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(append(flags, "--"), append(pos, args[i+1:]...)...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // let the parser report it
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(flags, pos...)
}
