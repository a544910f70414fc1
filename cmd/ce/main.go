// Command ce is Commonroom: a shared room around a Markdown file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/commonroom/ce/cli"
)

func main() {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Signals: sig, Exit: os.Exit,
	}))
}
