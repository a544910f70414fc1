package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// buildInfo is what the binary knows of its own build: a bug report, a
// support question and `serverInfo` all need the same answer.
type buildInfo struct {
	// Version is the module's version (a tag, or the pseudo-version Go
	// stamps from the repository), "dev" only when the build recorded none.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from ("" unknown);
	// Modified says the work tree had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// stampedVersion and stampedCommit are set by the linker in release builds
// (.goreleaser.yaml: -X github.com/commonroom/ce/cli.stampedVersion=…): a
// release built from a tag must say that tag, while `go build` in a clone
// records only a pseudo-version or "(devel)". When set they win over what
// the build information says; `go install …@vX` needs neither.
var stampedVersion, stampedCommit string

// readBuildInfo reads the binary's build information once per call; it is
// cheap and only read at start and by `ce version`.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "dev", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b = fromBuildInfo(b, bi)
	}
	if stampedVersion != "" {
		b.Version = stampedVersion
	}
	if stampedCommit != "" {
		b.Revision = stampedCommit
	}
	return b
}

// fromBuildInfo fills b from what the Go toolchain recorded.
func fromBuildInfo(b buildInfo, bi *debug.BuildInfo) buildInfo {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// version is the version the room announces (serverInfo, the banner).
func version() string { return readBuildInfo().Version }

// String is the one line `ce version` prints.
func (b buildInfo) String() string {
	s := "ce " + b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + b.Go
}

func versionCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "ce version [--json]   (also ce --version)",
		ShortHelp:  "print ce's version and the commit it was built from",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return &exitError{code: exitUsage, err: errors.New("version takes no arguments")}
			}
			return printVersion(env, *asJSON)
		},
	}
}

func printVersion(env Env, asJSON bool) error {
	b := readBuildInfo()
	if asJSON {
		return printJSON(env.Stdout, b)
	}
	_, err := fmt.Fprintln(env.Stdout, b)
	return err
}
