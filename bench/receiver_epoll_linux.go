//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// defaultReceiver is the fan-out receiver unless --receiver says otherwise.
const defaultReceiver = receiverEpoll

// epollReceiver reads every listen stream from a few goroutines, one epoll
// instance each (streams dealt round-robin): one read(2) per ready socket
// per wake-up (level-triggered, so a busy socket cannot starve the rest),
// each stream's bytes through its own chunkedSSE, every frame of a read
// stamped with the time that read returned. Its cost per frame is a share
// of a read and a parse, with no goroutine to wake per stream.
type epollReceiver struct {
	loops []*epollLoop
	next  atomic.Uint32
	quit  atomic.Bool
	wg    sync.WaitGroup
}

// epollLoop is one goroutine and its epoll instance.
type epollLoop struct {
	epfd    int
	mu      sync.RWMutex
	streams map[int32]*epollStream
	err     error // why run stopped early, if it did
}

// epollStream is one stream's socket (a dup of the net.Conn's descriptor,
// which is closed) and its parser. mu orders the bench closing the stream
// (a shutdown) against the loop closing the descriptor at its end, so a
// shutdown never reaches a descriptor number the kernel has given out again.
type epollStream struct {
	s  *listenStream
	mu sync.Mutex
	fd int
	p  chunkedSSE
}

// epollWaitMs bounds one epoll_wait, so a stopped receiver's goroutines
// notice within that time.
const epollWaitMs = 100

func newEpollReceiver() (receiver, error) {
	n := min(max(runtime.NumCPU(), 1), 4)
	r := &epollReceiver{}
	for range n {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, l := range r.loops {
				unix.Close(l.epfd)
			}
			return nil, fmt.Errorf("epoll_create1: %w", err)
		}
		r.loops = append(r.loops, &epollLoop{epfd: fd, streams: map[int32]*epollStream{}})
	}
	for _, l := range r.loops {
		r.wg.Go(func() { l.run(&r.quit) })
	}
	return r, nil
}

// open connects and reads the response head and the acknowledgement on the
// net.Conn (blocking, under its deadline, through the same parser the loop
// uses), then hands a duplicate of its descriptor to a loop and closes the
// net.Conn, so Go's poller lets go of the socket.
func (r *epollReceiver) open(ctx context.Context, o listenOptions, sink *atomic.Pointer[frameSink]) (*listenStream, error) {
	conn, br, resp, err := dialListen(ctx, o)
	if err != nil {
		return nil, err
	}
	defer conn.Close() // the loop reads a duplicate
	if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		return nil, fmt.Errorf("the listen response is not chunked (%v): the epoll receiver parses chunks itself", resp.TransferEncoding)
	}
	s := newListenStream(conn)
	s.sink = sink
	es := &epollStream{s: s, fd: -1}
	var ackErr error
	acked := false
	emit := func(now time.Time) func([]byte) {
		return func(line []byte) {
			if !acked {
				acked, ackErr = true, checkAck(line, o)
				return
			}
			s.handle(line, now) // a frame that came with the acknowledgement
		}
	}
	head, _ := br.Peek(br.Buffered()) // the body's first bytes, read with the head
	if err := es.p.feed(head, emit(time.Now())); err != nil {
		return nil, fmt.Errorf("reading the acknowledgement: %w", err)
	}
	buf := make([]byte, 4096)
	for !acked {
		n, err := conn.Read(buf)
		if n > 0 {
			if perr := es.p.feed(buf[:n], emit(time.Now())); perr != nil {
				return nil, fmt.Errorf("reading the acknowledgement: %w", perr)
			}
		}
		if err != nil && !acked {
			return nil, fmt.Errorf("reading the acknowledgement: %w", err)
		}
	}
	if ackErr != nil {
		return nil, ackErr
	}
	if es.p.done() {
		return nil, errors.New("the stream ended right after its acknowledgement")
	}
	sc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil, err
	}
	var derr error
	if err := sc.Control(func(fd uintptr) { es.fd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup: %w", derr)
	}
	if err := unix.SetNonblock(es.fd, true); err != nil {
		unix.Close(es.fd)
		return nil, err
	}
	s.conn = nil
	s.closer = es.shutdown
	l := r.loops[int(r.next.Add(1))%len(r.loops)]
	if err := l.add(es); err != nil {
		unix.Close(es.fd)
		return nil, err
	}
	return s, nil
}

// shutdown ends the stream from our side: the loop then reads the end and
// finishes the stream (state closed, done closed).
func (es *epollStream) shutdown() {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.fd >= 0 {
		unix.Shutdown(es.fd, unix.SHUT_RDWR)
	}
}

// add hands a stream to the loop; es.mu is held so the loop cannot end it
// before it is fully registered.
func (l *epollLoop) add(es *epollStream) error {
	es.mu.Lock()
	defer es.mu.Unlock()
	fd := es.fd
	l.mu.Lock()
	l.streams[int32(fd)] = es
	l.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.mu.Lock()
		delete(l.streams, int32(fd))
		l.mu.Unlock()
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

func (l *epollLoop) run(quit *atomic.Bool) {
	events := make([]unix.EpollEvent, 512)
	buf := make([]byte, 256<<10)
	for !quit.Load() {
		n, err := unix.EpollWait(l.epfd, events, epollWaitMs)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			l.err = fmt.Errorf("epoll_wait: %w", err)
			return
		}
		for _, ev := range events[:n] {
			l.mu.RLock()
			es := l.streams[ev.Fd]
			l.mu.RUnlock()
			if es != nil {
				l.service(es, buf)
			}
		}
	}
}

// service reads once from a ready socket and parses what came. A body
// whose last chunk arrived is over, as io.EOF from the goroutine
// receiver's chunked reader says (the connection itself may be kept alive).
func (l *epollLoop) service(es *epollStream, buf []byte) {
	es.mu.Lock()
	fd := es.fd
	es.mu.Unlock()
	if fd < 0 {
		return
	}
	n, err := unix.Read(fd, buf)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
	case err != nil:
		l.end(es, err)
	case n == 0:
		l.end(es, io.EOF)
	default:
		now := time.Now()
		if perr := es.p.feed(buf[:n], func(line []byte) { es.s.handle(line, now) }); perr != nil {
			l.end(es, perr)
		} else if es.p.done() {
			l.end(es, io.EOF)
		}
	}
}

// end finishes a stream: out of the loop, its descriptor closed, its end
// state set from err as the goroutine receiver sets it, done closed.
func (l *epollLoop) end(es *epollStream, err error) {
	es.mu.Lock()
	fd := es.fd
	if fd >= 0 {
		l.mu.Lock()
		delete(l.streams, int32(fd))
		l.mu.Unlock()
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		unix.Close(fd)
		es.fd = -1
	}
	es.mu.Unlock()
	if fd < 0 {
		return // already ended
	}
	es.s.ended(err)
	close(es.s.done)
}

// stop stops the loops and ends any stream still open as closed by us.
func (r *epollReceiver) stop() {
	if r.quit.Swap(true) {
		return
	}
	r.wg.Wait()
	for _, l := range r.loops {
		l.mu.RLock()
		left := make([]*epollStream, 0, len(l.streams))
		for _, es := range l.streams {
			left = append(left, es)
		}
		l.mu.RUnlock()
		for _, es := range left {
			es.s.closed.Store(true)
			l.end(es, errReceiverStopped)
		}
		unix.Close(l.epfd)
	}
}

// errReceiverStopped ends streams still open when the receiver stops.
var errReceiverStopped = errors.New("the receiver stopped")
