package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// wayIn is a hint that walkHints opened: the plugin (open until the caller
// closes it), the hint as the room wrote it, and as the plugin dials it.
type wayIn struct {
	plug transport.Plugin
	hint room.Hint
	th   transport.Hint
}

// url is the room's base URL over this way in: its host names the room in
// the Host header, and every connection goes through the plugin.
func (w wayIn) url() string { return "http://" + w.th.HostPort() }

// walkHints is the negotiation of `ce join` and `ce call`: it tries hints
// in order; the provider a hint's type names opens a plugin (bounded by
// timeout), and use is called with it. A loopback hint whose machine tag
// is not this machine's for workspaceID is never dialled (loopbackElsewhere). A hint that cannot be opened, or
// whose use answers transport_unavailable (nothing reached the room), is
// skipped with its reason, its plugin closed, and the next one tried. Any
// other answer of use ends the walk: nil returns the way in still open, an
// error closes it and is returned. When every hint was skipped, the way in
// is empty (plug nil) and tried names each hint with its reason.
func walkHints(ctx context.Context, env Env, log *slog.Logger, ts *transports, workspaceID string, hints []room.Hint, timeout time.Duration,
	use func(wayIn) error) (wayIn, []string, error) {
	var tried []string
	skip := func(h room.Hint, why string) {
		tried = append(tried, fmt.Sprintf("%s: %s", hintLabel(h), strings.TrimPrefix(why, transport.ErrUnavailable.Error()+": ")))
	}
	for _, h := range hints {
		prov, err := ts.provider(h.Type)
		if err != nil {
			skip(h, err.Error())
			continue
		}
		th := fromRoomHint(h)
		if th.Address == "" && th.Type == transport.LoopbackName {
			th.Address = "127.0.0.1"
		}
		if th.Address == "" || th.Port < 1 {
			skip(h, "the hint names no address and port")
			continue
		}
		if why := loopbackElsewhere(h, workspaceID); why != "" {
			skip(h, why)
			continue
		}
		stateDir := ""
		if h.Type != transport.LoopbackName {
			stateDir = joinStateDir(env, h.Type)
			if err := makeStateDir(stateDir); err != nil {
				skip(h, fmt.Sprintf("its state directory: %v", err))
				continue
			}
		}
		octx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("not open within --transport-timeout (%s)", timeout))
		plug, err := openPlugin(octx, prov, transportOptions(env, log, h.Type, stateDir, "", true))
		cancel()
		if err != nil {
			skip(h, err.Error())
			continue
		}
		w := wayIn{plug: plug, hint: h, th: th}
		err = use(w)
		if room.ErrorKind(err) == room.KindTransportUnavailable {
			plug.Close()
			skip(h, room.AsError(err).Message)
			continue
		}
		if err != nil {
			plug.Close()
			return wayIn{}, tried, err
		}
		return w, tried, nil
	}
	if len(tried) == 0 {
		tried = append(tried, "the invitation names no transport")
	}
	return wayIn{}, tried, nil
}
