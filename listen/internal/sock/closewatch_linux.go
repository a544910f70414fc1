//go:build linux && (amd64 || arm64)

package sock

import (
	"sync"
	"syscall"
)

// CloseWatch notices clients that close a detached stream. net/http learns
// it from a reader goroutine per connection; one epoll set for the whole
// hub does it without a goroutine or buffer per stream. Each socket is
// watched for the peer's close (EPOLLRDHUP, and the always-reported
// EPOLLHUP and EPOLLERR), edge-triggered, never for input: a client that
// sends bytes on a stream is not a client that left.
type CloseWatch struct {
	epfd    int
	wake    [2]int // a pipe whose read end is in the set: stop writes to it
	mu      sync.Mutex
	next    uint64
	onClose map[uint64]func()
	stopped bool
	done    chan struct{}
}

// NewCloseWatch starts the watcher's goroutine; nil if epoll is unavailable.
func NewCloseWatch() *CloseWatch {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &CloseWatch{epfd: epfd, onClose: map[uint64]func(){}, done: make(chan struct{})}
	if err := syscall.Pipe2(w.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN} // id 0: the wake pipe
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, w.wake[0], &ev); err != nil {
		syscall.Close(w.wake[0])
		syscall.Close(w.wake[1])
		syscall.Close(epfd)
		return nil
	}
	go w.run()
	return w
}

// Add watches fd and calls gone once when its peer closes; Remove must be
// called with the id before fd is closed.
func (w *CloseWatch) Add(fd int, gone func()) uint64 {
	w.mu.Lock()
	w.next++
	id := w.next
	w.onClose[id] = gone
	w.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR | -syscall.EPOLLET,
		Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if err := syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		// Cannot watch it: the stream still ends on a failed write, the
		// probe or its lag, only later.
		w.mu.Lock()
		delete(w.onClose, id)
		w.mu.Unlock()
	}
	return id
}

// Remove stops watching fd, before it is closed.
func (w *CloseWatch) Remove(id uint64, fd int) {
	w.mu.Lock()
	delete(w.onClose, id)
	w.mu.Unlock()
	_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, fd, &syscall.EpollEvent{})
}

func (w *CloseWatch) run() {
	defer close(w.done)
	evs := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.epfd, evs, -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		for _, ev := range evs[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				w.mu.Lock()
				stopped := w.stopped
				w.mu.Unlock()
				if stopped {
					return
				}
				continue
			}
			w.mu.Lock()
			gone := w.onClose[id]
			delete(w.onClose, id)
			w.mu.Unlock()
			if gone != nil {
				gone()
			}
		}
	}
}

// Stop ends the watcher's goroutine and closes its descriptors; once every
// stream it watched has ended. Safe to call more than once.
func (w *CloseWatch) Stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.stopped = true
	w.mu.Unlock()
	_, _ = syscall.Write(w.wake[1], []byte{1})
	<-w.done
	syscall.Close(w.wake[0])
	syscall.Close(w.wake[1])
	syscall.Close(w.epfd)
}

// DetachSupported says streams can be detached on this platform.
const DetachSupported = true
