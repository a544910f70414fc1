//go:build !linux

package main

import "errors"

// defaultReceiver is the fan-out receiver unless --receiver says otherwise:
// without epoll, a goroutine per stream.
const defaultReceiver = receiverGoroutines

func newEpollReceiver() (receiver, error) {
	return nil, errors.New("the epoll receiver needs Linux; use --receiver goroutines")
}
