package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// maxTokenFile bounds what --token-file reads: a session token is far
// shorter; more is a wrong file.
const maxTokenFile = 4096

type pageFlags struct {
	url, tokenFile string
	json           bool
	timeout        time.Duration
}

// pageCommand is `ce page`: a fresh one-time link to the page of a session
// one already holds (issue 28), e.g. after the room restarted (page cookies
// live in the room's memory) or the first link was used. The token is read
// from the environment or a file, never from the command line, where other
// users of the machine could read it.
func pageCommand(env Env) *ffcli.Command {
	var f pageFlags
	fs := flag.NewFlagSet("ce page", flag.ContinueOnError)
	fs.StringVar(&f.url, "url", "", "the room's URL as `ce join` printed it (Room:, or Local: while holding a forward)")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the session token from this file (else env CE_SESSION)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.DurationVar(&f.timeout, "timeout", DefaultCallTimeout, "how long the request may take")
	return &ffcli.Command{
		Name:       "page",
		ShortUsage: "ce page --url URL [--token-file FILE] [--json]",
		ShortHelp:  "print a fresh one-time link to your session's page (token from CE_SESSION or --token-file)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usageError("ce page takes no arguments (the token is read from CE_SESSION or --token-file, never the command line)")
			}
			u, err := url.Parse(f.url)
			if f.url == "" || err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return usageError("--url must be the room's http://HOST:PORT URL, as `ce join` printed it")
			}
			if f.timeout <= 0 {
				return usageError("--timeout must be positive (got %s)", f.timeout)
			}
			token, err := pageToken(env, f.tokenFile)
			if err != nil {
				return err
			}
			link, err := pageLink(ctx, &http.Client{Timeout: f.timeout}, strings.TrimSuffix(f.url, "/"), token)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(env.Stdout, map[string]any{"page_url": link})
			}
			fmt.Fprintf(env.Stdout, "Page:    %s   (your page in a browser; the link works once)\n", link)
			return nil
		},
	}
}

// pageToken reads the session token from --token-file, else CE_SESSION.
func pageToken(env Env, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageError("cannot read --token-file: %v", errors.Unwrap(err))
		}
		if len(b) > maxTokenFile {
			return "", usageError("--token-file holds %d bytes; a session token is one short line", len(b))
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", usageError("--token-file is empty")
	}
	if t := strings.TrimSpace(env.Getenv("CE_SESSION")); t != "" {
		return t, nil
	}
	return "", usageError("no session: set CE_SESSION or give --token-file FILE (the token `ce join` printed)")
}

// pageLink mints a page key at the room at base for token and returns the
// link to open.
func pageLink(ctx context.Context, hc *http.Client, base, token string) (string, error) {
	var out struct {
		Key  string `json:"key"`
		Path string `json:"path"`
	}
	if err := callRoom(ctx, hc, "POST", base+"/session/page", token, map[string]any{}, &out); err != nil {
		return "", err
	}
	if out.Key == "" || out.Path == "" {
		return "", room.Errorf(room.KindInternal, "the room answered without a page key")
	}
	return base + out.Path + url.QueryEscape(out.Key), nil
}
