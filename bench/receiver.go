package main

import (
	"context"
	"fmt"
	"sync/atomic"
)

// A receiver holds the fan-out's listen streams and reads them. The
// goroutine receiver gives every stream a goroutine of its own; with
// 10,000 streams that is 10,000 goroutines woken per change on the same
// cores as the server, and the receipt times then measure the receiver as
// much as the server. The epoll receiver (Linux) reads every socket from a
// few goroutines, parsing HTTP chunks and SSE lines itself, and stamps each
// frame when its read(2) returns. Both open streams the same way (the
// request written and the response head parsed by dialListen, the
// acknowledgement checked) and report to the same sinks.
type receiver interface {
	// open opens one stream, checks its acknowledgement and starts reading
	// it, reporting frames to sink.
	open(ctx context.Context, o listenOptions, sink *atomic.Pointer[frameSink]) (*listenStream, error)
	// stop ends the receiver once every stream it opened has been closed.
	stop()
}

// Receiver kinds for --receiver.
const (
	receiverEpoll      = "epoll"
	receiverGoroutines = "goroutines"
)

// newReceiver makes a receiver of the kind --receiver names.
func newReceiver(kind string) (receiver, error) {
	switch kind {
	case receiverGoroutines:
		return goroutineReceiver{}, nil
	case receiverEpoll:
		return newEpollReceiver()
	}
	return nil, fmt.Errorf("unknown receiver %q", kind)
}

// goroutineReceiver reads each stream in a goroutine of its own.
type goroutineReceiver struct{}

func (goroutineReceiver) open(ctx context.Context, o listenOptions, sink *atomic.Pointer[frameSink]) (*listenStream, error) {
	s, err := openListen(ctx, o)
	if err != nil {
		return nil, err
	}
	s.sink = sink
	go s.read() // stopped by s.close
	return s, nil
}

func (goroutineReceiver) stop() {}
