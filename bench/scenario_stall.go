package main

import (
	"context"
	"fmt"
	"time"
)

// The stalled-reader test: one listen stream whose client stops reading
// while changes flow. The room promises to drop a subscriber that lags by
// more than --listen-max-lag; this measures how long that really takes, and
// where the unread frames wait meanwhile.

type stallResult struct {
	MaxLag         string  `json:"listen_max_lag"`
	RequestedRate  float64 `json:"requested_changes_per_sec"`
	Rate           float64 `json:"changes_per_sec"` // achieved
	TimeoutS       float64 `json:"timeout_seconds"`
	MaxSendQueueKB float64 `json:"max_server_send_queue_kb"`
	Dropped        bool    `json:"dropped"`
	DropSeconds    float64 `json:"seconds_to_drop"` // from the moment it stopped reading
	// WindowFullSeconds is how long after it stopped reading the client's
	// receive window was full: from then on the room's send queue for the
	// socket never emptied again. The room cannot notice anything before
	// that, so the lag bound is judged from here.
	WindowFullSeconds float64 `json:"seconds_to_fill_receive_window"`
	AfterFullSeconds  float64 `json:"seconds_from_full_window_to_drop"`
	// FindingBoundS is when a drop (or no drop) becomes a finding:
	// 3 × --listen-max-lag after the receive window was full.
	FindingBoundS  float64 `json:"finding_bound_seconds"`
	Attribution    string  `json:"attribution"`
	Cause          string  `json:"cause"`
	StalledEnd     string  `json:"stalled_stream_end"`
	HealthyStreams int     `json:"healthy_streams"`
	HealthyDropped int     `json:"healthy_dropped"`
	HealthyLost    int64   `json:"healthy_frames_lost"`
}

// stallBoundFactor: a stalled reader dropped later than this many
// --listen-max-lag after its receive window filled is reported as a
// finding. The room samples sockets periodically and must see no progress
// for a whole max-lag, so up to about 1.5 × is its design; 3 × leaves
// room for a busy machine without hiding a bound that is not enforced.
const stallBoundFactor = 3

// fanoutStall opens healthy streams and one whose client stops reading
// (with a tiny receive buffer), drives changes, and times how long the room
// takes to drop it. It samples the room's end of that socket
// (/proc/net/tcp) for its send queue, which shows when the client's window
// closed and where the unread frames wait meanwhile, and for its state,
// which attributes the drop to that stream and no other.
func fanoutStall(ctx context.Context, e *env) (*stallResult, error) {
	lag := e.cfg.stallMaxLag
	c, err := e.room(ctx, "stall", true, "--listen-max-lag", lag.String(), "--streams-per-session", "64")
	if err != nil {
		return nil, err
	}
	defer e.release(c)
	const healthy = 10
	f, err := newFanRoom(ctx, e, c, fanoutTasks, healthy+1, 64)
	if err != nil {
		return nil, err
	}
	defer f.closeAll()
	if err := f.open(ctx, healthy); err != nil {
		return nil, err
	}
	addr, _ := hostPort(c.ingressURL)
	stalled, err := openListen(ctx, listenOptions{addr: addr, token: f.listeners[0].Token, id: 1000, taskIDs: f.taskIDs, rcvBuf: 2048})
	if err != nil {
		return nil, err
	}
	defer stalled.close(false) // never read after its ack
	clientPort, serverPort := stalled.ports()
	// Without /proc/net/tcp (or if the socket cannot be found) the drop is
	// attributed by the room's count alone and no fill time is known.
	_, _, sockVisible := serverSocket(serverPort, clientPort)
	m0, err := c.metrics(ctx)
	if err != nil {
		return nil, err
	}
	r := &stallResult{MaxLag: lag.String(), RequestedRate: e.cfg.stallRate, HealthyStreams: healthy, TimeoutS: e.cfg.stallTimeout.Seconds()}
	e.logf("fan-out: one stalled reader among %d healthy streams, %.0f changes/s, --listen-max-lag %s (waiting up to %s)",
		healthy, r.RequestedRate, lag, e.cfg.stallTimeout)
	var sink frameSink = &fanPhase{}
	f.sink.Store(&sink)
	dctx, stopDriving := context.WithCancel(ctx)
	driving := make(chan struct{})
	stallAt := time.Now() // the stalled client has read its ack and nothing since
	go func() {
		defer close(driving)
		f.drive(ctx, dctx, e.cfg.stallTimeout+time.Minute, r.RequestedRate, &fanPhase{})
	}()
	nextLog := stallAt.Add(10 * time.Second)
	var (
		fullAt  time.Time // start of the current unbroken run of a non-empty send queue
		countAt time.Time // since when the room counts a drop the healthy streams do not explain
		dropAt  time.Time
		m       roomMetrics
	)
	for time.Since(stallAt) < e.cfg.stallTimeout && ctx.Err() == nil {
		now := time.Now()
		st, q, ok := serverSocket(serverPort, clientPort)
		established := ok && st == "ESTABLISHED"
		if established {
			r.MaxSendQueueKB = max(r.MaxSendQueueKB, float64(q)/1024)
			switch {
			case q == 0:
				fullAt = time.Time{}
			case fullAt.IsZero():
				fullAt = now
			}
		}
		if m, err = c.metrics(ctx); err != nil {
			stopDriving()
			<-driving
			return nil, err
		}
		healthyGone := 0
		for _, s := range f.streams {
			if s.state.Load() != streamOpen {
				healthyGone++
			}
		}
		// A healthy stream the room dropped is counted by the room a moment
		// before its reader sees the end, so an unexplained drop must
		// persist before it is taken for the stalled one.
		if int(m.Listen.Dropped-m0.Listen.Dropped) > healthyGone {
			if countAt.IsZero() {
				countAt = now
			}
		} else {
			countAt = time.Time{}
		}
		switch {
		case sockVisible && !established:
			// The room closed the stalled stream's socket: unambiguous.
			dropAt, r.Attribution = now, "the room's end of its socket left ESTABLISHED"
			if !countAt.IsZero() {
				dropAt = countAt // counted a little before the socket closed
				r.Attribution += ", after the room counted the drop"
			}
		case !countAt.IsZero() && now.Sub(countAt) >= time.Second:
			dropAt = countAt
			r.Attribution = "the room counted one drop more than the healthy streams saw, for 1s"
		}
		if !dropAt.IsZero() {
			r.Dropped = true
			break
		}
		if time.Now().After(nextLog) {
			e.logf("fan-out: stalled reader still not dropped after %s; the room has %.0f KiB queued in the kernel for it",
				time.Since(stallAt).Round(time.Second), r.MaxSendQueueKB)
			nextLog = nextLog.Add(10 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	end := time.Now()
	if r.Dropped {
		end = dropAt
		r.DropSeconds = dropAt.Sub(stallAt).Seconds()
	}
	if !fullAt.IsZero() {
		r.WindowFullSeconds = fullAt.Sub(stallAt).Seconds()
	} // else never seen full: judge from when it stopped reading, the stricter choice
	r.AfterFullSeconds = end.Sub(stallAt).Seconds() - r.WindowFullSeconds
	r.FindingBoundS = r.WindowFullSeconds + stallBoundFactor*lag.Seconds()
	stopDriving()
	<-driving
	r.Rate = float64(f.committed.Load()) / time.Since(stallAt).Seconds()
	f.waitSettled(ctx, 10*time.Second)
	if r.Dropped {
		// Read once things have settled: the socket may close a moment
		// before the room's counters catch up.
		if m1, err := c.metrics(ctx); err == nil {
			m = m1
		}
		switch {
		case m.Listen.DroppedQueueFull > m0.Listen.DroppedQueueFull:
			r.Cause = "queue full"
		case m.Listen.DroppedSlow > m0.Listen.DroppedSlow:
			r.Cause = "slow: lagging, no socket progress, or a write failed"
		case m.Listen.Disconnected > m0.Listen.Disconnected:
			r.Cause = "counted as disconnected, not as dropped"
		default:
			r.Cause = "its socket closed, but the room counted no drop"
		}
	}
	switch {
	case r.Dropped && !sockVisible:
		r.StalledEnd = "not known: its socket is not visible in /proc/net/tcp"
	case r.Dropped:
		// A drop must close the room's end of the socket: the client then
		// sees the stream end without the final result.
		closedBy := time.Now().Add(5 * time.Second)
		for {
			st, q, ok := serverSocket(serverPort, clientPort)
			switch {
			case !ok:
				r.StalledEnd = "the room closed the socket"
			case st != "ESTABLISHED":
				r.StalledEnd = fmt.Sprintf("the room closed its end (%s, %.0f KiB never read)", st, float64(q)/1024)
			case time.Now().After(closedBy):
				r.StalledEnd = fmt.Sprintf("reported dropped, but the room's socket is still ESTABLISHED 5s later (%.0f KiB queued)", float64(q)/1024)
				e.rep.finding(fmt.Sprintf("the room counted a stalled reader as dropped but its socket stayed ESTABLISHED with %.0f KiB queued: "+
					"the handler's goroutine and connection are held until the peer reads or goes away", float64(q)/1024))
			default:
				time.Sleep(50 * time.Millisecond)
				continue
			}
			break
		}
	default:
		r.StalledEnd = fmt.Sprintf("still open after %s", e.cfg.stallTimeout)
	}
	// The finding is about the room's bound, so it is judged from when the
	// client's receive window was full, not from when the bench stopped
	// reading (filling the window takes as long as the change rate makes
	// it), and only if the run waited long enough to judge.
	waited := end.Sub(stallAt).Seconds()
	switch {
	case r.Dropped && r.DropSeconds > r.FindingBoundS:
		e.rep.finding(fmt.Sprintf("a reader that stopped reading was dropped only %.1fs after its receive window was full "+
			"(%.1fs after it stopped reading) although --listen-max-lag is %s; meanwhile the room queued up to %.0f KiB "+
			"in the kernel for it", r.AfterFullSeconds, r.DropSeconds, lag, r.MaxSendQueueKB))
	case !r.Dropped && waited > r.FindingBoundS:
		e.rep.finding(fmt.Sprintf("a reader that stopped reading was not dropped within %s (%.1fs after its receive window was full) "+
			"although --listen-max-lag is %s; meanwhile the room queued up to %.0f KiB in the kernel for it",
			e.cfg.stallTimeout, r.AfterFullSeconds, lag, r.MaxSendQueueKB))
	case !r.Dropped:
		e.logf("fan-out: stalled reader not dropped within %s, which is shorter than %d × --listen-max-lag after its window filled; not judged",
			e.cfg.stallTimeout, stallBoundFactor)
	}
	// The stalled stream is not one of f.streams, so accounting covers the
	// healthy ones only.
	var acc fanoutSizeResult
	f.account(ctx, "stall test", &acc)
	r.HealthyDropped, r.HealthyLost = acc.StreamsDropped, acc.FramesLost
	if r.HealthyDropped > 0 {
		// Not an invariant: a reader starved of CPU can lag by more than
		// --listen-max-lag, and then the room may drop it. On a quiet
		// machine it means the room mistook a reader for a stalled one.
		e.rep.finding(fmt.Sprintf("the room dropped %d of %d healthy streams during the stall test (--listen-max-lag %s); "+
			"read it with the machine's load: a starved reader can lag that long, a reading one should not be dropped",
			r.HealthyDropped, healthy, lag))
	}
	return r, ctx.Err()
}
