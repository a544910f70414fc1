package cli

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// maxLocalForwards caps the connections `ce join --hold` and `ce mcp`
// carry at once, as the room caps its tailnet forwards: a runaway local
// client cannot hold unbounded descriptors here or at the room.
const maxLocalForwards = 1024

// forward is `ce join --hold` (and `ce mcp` over a transport): a listener on
// 127.0.0.1:0 whose every connection is carried to the room through the
// plugin, so an MCP client or a `ce` command on this machine reaches a room
// elsewhere at url.
type forward struct {
	*transport.Forwarder
	url string
}

func startForward(plug transport.Plugin, h transport.Hint, dialTimeout time.Duration, log *slog.Logger) (*forward, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, room.Errorf(room.KindInternal, "cannot open the local forward: %v", err)
	}
	fw := transport.Forward(ln, transport.ForwardConfig{
		Name:        "forward to the room over " + h.Type,
		Dial:        func(ctx context.Context) (net.Conn, error) { return plug.Dial(ctx, h) },
		DialTimeout: dialTimeout,
		Max:         maxLocalForwards,
		Log:         log,
	})
	return &forward{Forwarder: fw, url: "http://" + ln.Addr().String()}, nil
}
