package cli

import (
	"flag"
	"io"
	"log/slog"
	"strings"
)

// logFormats are the choices of --log-format: text (slog's key=value
// lines, for a person at a terminal) and json (one JSON object per line,
// for a log collector).
var logFormats = []string{"text", "json"}

// logFlags are --log-level and --log-format, which every command that
// makes a logger takes, so that a room's operator can choose the form of
// every log line ce writes.
type logFlags struct {
	level, format string
}

// add declares --log-level (default level) and --log-format on fs.
func (f *logFlags) add(fs *flag.FlagSet, level string) {
	fs.StringVar(&f.level, "log-level", level, "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&f.format, "log-format", "text", "the log's form: "+strings.Join(logFormats, " or ")+" (one JSON object per line)")
}

// logger is the logger the flags ask for, writing to w; a level or a
// format it does not know is a usage error naming the choices.
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	l, err := parseLevel(f.level)
	if err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch f.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format: unknown format %q (choose %s)", f.format, strings.Join(logFormats, " or "))
}
