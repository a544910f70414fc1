// Command ce is Commonroom: a shared room around a Markdown file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/commonroom/ce/cli"
	"github.com/commonroom/ce/transport"
	"github.com/commonroom/ce/transport/exec"
	"github.com/commonroom/ce/transport/tailscale"
)

func main() {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Signals: sig, Exit: os.Exit,
		Transports: transports(),
	}))
}

// transports is every built-in transport: loopback (always there),
// Tailscale (an embedded tailnet node), and external programs as exec:NAME. Each built-in plugin registers here, and
// only here, so the core never names one.
func transports() *transport.Registry {
	r := transport.NewRegistry()
	r.Register(tailscale.Name, func() transport.Provider { return tailscale.NewProvider() })
	r.RegisterPrefix(exec.Prefix, exec.NewProvider)
	return r
}
