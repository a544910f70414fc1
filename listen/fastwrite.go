package listen

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

// The fast path. At ten thousand streams a change used to wake ten thousand
// goroutines, each to make one write; the wake-ups, their selects and
// timers cost about a third of the room's fan-out CPU, the write(2) the rest.
// Now the broadcaster's own small pool of writers (one per P) writes each
// stream's frames of a run of batches straight to its socket when it is
// ready: one non-blocking write(2), no goroutine woken. Only streams on a
// plain TCP socket qualify (ServeDetached, PassThroughConn). A stream is
// written fast only when nothing of it is waiting (its queue is empty, no bytes are carried
// over, its goroutine is not writing); otherwise the frame is queued as
// before and the stream's goroutine writes it, with the write deadline, in
// order. A fast write the kernel takes only in part (or not at all, or
// fails) leaves the rest as the stream's carry and wakes its goroutine,
// which writes the carry first: frames are never reordered or interleaved.
// Every rule is the slow path's: the queue bound (a queued frame), the time
// bound (a frame older than MaxLag is queued, and the goroutine drops the
// stream; a carried write has the deadline), the socket probe and the
// keep-alives (fast writes mark the stream written), the graceful final
// frame (written by the goroutine, after everything).

// epoch anchors fastWriter.last on the monotonic clock.
var epoch = time.Now()

// fastWriter is what the broadcaster's writers need of a detached stream.
type fastWriter struct {
	raw *sock.RawWriter
	tag []byte // ServeOptions.Tag
	// wmu is held by whoever writes the socket: a pool writer (TryLock,
	// never waiting) for one non-blocking write, or the stream's goroutine
	// for a burst, a keep-alive or the final frame.
	wmu   sync.Mutex
	carry []byte // guarded by wmu: bytes of a fast write the kernel did not take
	// carryFrames is how many frames the carry finishes (for the
	// afterWrite hook), guarded by wmu.
	carryFrames int
	// last is when a fast write last put bytes on the socket (ns since
	// epoch), and dirty says one did since the goroutine last looked: the
	// keep-alive and the socket probe count these writes as the stream's own.
	last  atomic.Int64
	dirty atomic.Bool
}

// socketGate is what a stream's own writer does so that it and the pool
// writers never interleave on its socket: hold the socket while it writes
// (a fast write in flight is waited out, and none starts until release),
// write first what a fast write left over, and count the pool writers'
// writes as the stream's own (for the keep-alive and the socket probe).
// A stream on the fast path has its fastWriter; every other stream has
// noFastPath, whose methods do nothing.
type socketGate interface {
	hold()
	release()
	// hasCarry says a fast write left bytes for the stream's writer.
	hasCarry() bool
	// takeCarry hands those bytes over, with how many frames they finish,
	// for the writer to write first in its burst (stream.carry).
	takeCarry() (b []byte, frames int)
	// lastAfter is t, or the last fast write when that is later.
	lastAfter(t time.Time) time.Time
	// wroteFast reports whether a fast write put bytes on the socket since
	// it was last asked.
	wroteFast() bool
}

// noFastPath is the socketGate of a stream the pool writers never write:
// served in place, not on a plain socket, or Config.NoFastWrite.
type noFastPath struct{}

func (noFastPath) hold()                           {}
func (noFastPath) release()                        {}
func (noFastPath) hasCarry() bool                  { return false }
func (noFastPath) takeCarry() ([]byte, int)        { return nil, 0 }
func (noFastPath) lastAfter(t time.Time) time.Time { return t }
func (noFastPath) wroteFast() bool                 { return false }

func (fw *fastWriter) hold()    { fw.wmu.Lock() }
func (fw *fastWriter) release() { fw.wmu.Unlock() }

func (fw *fastWriter) hasCarry() bool { return fw.carry != nil }

func (fw *fastWriter) takeCarry() ([]byte, int) {
	b, n := fw.carry, fw.carryFrames
	fw.carry, fw.carryFrames = nil, 0
	return b, n
}

func (fw *fastWriter) lastAfter(t time.Time) time.Time {
	if d := fw.last.Load(); d != 0 {
		if lt := epoch.Add(time.Duration(d)); lt.After(t) {
			return lt
		}
	}
	return t
}

func (fw *fastWriter) wroteFast() bool { return fw.dirty.Load() && fw.dirty.Swap(false) }

// gate is s's socketGate: its fast writer once detached on a plain socket,
// noFastPath otherwise.
func (s *Subscription) gate() socketGate {
	if fw := s.fast.Load(); fw != nil {
		return fw
	}
	return noFastPath{}
}

// write encodes fs as one chunk in buf and makes one non-blocking write of
// it. Whatever the kernel did not take becomes the carry, and q's goroutine
// is woken to write it with the deadline. The caller holds wmu and has
// checked that nothing else of this stream waits. It returns buf for reuse,
// how many of the chunk's bytes went out of how many, and how many frames
// went out whole.
func (fw *fastWriter) write(q *frameQueue, fs []*queued, buf []byte) (_ []byte, wrote, of, whole int) {
	buf = append(buf[:0], make([]byte, chunkHead)...)
	var ends [8]int // where the first frames end, to count the whole ones on a fall-back
	for i, f := range fs {
		buf = f.AppendTo(buf, fw.tag)
		if i < len(ends) {
			ends[i] = len(buf)
		}
	}
	start := putChunkSize(buf)
	buf = append(buf, '\r', '\n')
	b := buf[start:]
	n, err := fw.raw.Try(b)
	if n > 0 {
		fw.last.Store(int64(time.Since(epoch)))
		if !fw.dirty.Load() {
			fw.dirty.Store(true)
		}
	}
	if err == nil && n == len(b) {
		return buf, n, n, len(fs)
	}
	for whole < min(len(fs), len(ends)) && ends[whole] <= start+n {
		whole++
	}
	fw.carry = append([]byte(nil), b[n:]...)
	fw.carryFrames = len(fs) - whole
	q.poke()
	return buf, n, len(b), whole
}

// putChunkSize writes the chunk-size line for buf[chunkHead:] into the room
// kept before it and returns where the chunk starts.
func putChunkSize(buf []byte) int {
	var size [chunkHead]byte
	line := append(strconv.AppendInt(size[:0], int64(len(buf)-chunkHead), 16), '\r', '\n')
	start := chunkHead - len(line)
	copy(buf[start:], line)
	return start
}

// writerPool is the broadcaster's pool of writers: the streams of the run
// being fanned out, each with its frames in Subscription.pend, taken a
// slice at a time from wnext (under wmu, since a merge appends to work
// while the writers take from it); a scratch buffer, a result and a
// running flag per writer. Only the broadcaster and the writers it runs
// touch it.
type writerPool struct {
	wmu     sync.Mutex
	work    []*Subscription
	wnext   int
	scratch [][]byte
	results []writerResult
	running []atomic.Bool
	writers sync.WaitGroup
	runNow  int64 // the injected clock when the run's writers started
}

func newWriterPool(n int) writerPool {
	return writerPool{scratch: make([][]byte, n), results: make([]writerResult, n), running: make([]atomic.Bool, n)}
}

// writerResult is what one pool writer did with its share of a run.
type writerResult struct {
	n    uint64          // frames queued or written
	full []*Subscription // streams whose queue was full
}

// fanOutInline is the number of frames below which the broadcaster writes
// alone: starting writers costs more than it saves.
const fanOutInline = 256

// fanOutSlice is how many streams a pool writer takes at a time: small, so
// a writer whose thread the OS preempts holds up few streams while the
// others take the rest.
const fanOutSlice = 32

// maxWriters bounds the pool.
const maxWriters = 8

// writerCount is how many writers share a run: one per P.
func writerCount() int {
	return max(1, min(runtime.GOMAXPROCS(0), maxWriters))
}

// fanOut offers every stream in h.work its frames (Subscription.pend). Each
// stream is in the list once per run, so whichever writer takes it writes
// all of its frames, in order, and runs are fanned out one after the
// other; batches published meanwhile may join the run (merge.go). It
// returns the frames queued or written and the streams whose queue was
// full. The hub is not locked: a stream that ends meanwhile refuses its
// frames (frameQueue.closed).
func (h *Hub) fanOut(total int) (uint64, []*Subscription) {
	if total == 0 {
		return 0, nil
	}
	h.runNow = h.cfg.Now().UnixNano()
	if total >= fanOutInline {
		h.spawnWriters()
	}
	h.runWriter(0, h.runNow)
	h.writers.Wait()
	h.wmu.Lock()
	clear(h.work)
	h.work, h.wnext = h.work[:0], 0
	h.wmu.Unlock()
	var n uint64
	var full []*Subscription
	for i := range h.results {
		r := &h.results[i]
		n += r.n
		full = append(full, r.full...)
		clear(r.full)
		*r = writerResult{full: r.full[:0]}
	}
	return n, full
}

// spawnWriters starts the pool writers that are not running, as many as
// the streams left to write keep busy (the broadcaster is writer 0).
func (h *Hub) spawnWriters() {
	h.wmu.Lock()
	left := len(h.work) - h.wnext
	h.wmu.Unlock()
	now := h.runNow
	for i := 1; i < len(h.results) && i*fanOutSlice < left; i++ {
		if h.running[i].CompareAndSwap(false, true) {
			h.writers.Go(func() {
				defer h.running[i].Store(false)
				h.runWriter(i, now)
			})
		}
	}
}

// runWriter is pool writer i: it takes slices of h.work until none is left.
// Writer 0, the broadcaster, merges batches published meanwhile into the
// run before each slice.
func (h *Hub) runWriter(i int, now int64) {
	r := &h.results[i]
	buf := h.scratch[i]
	for {
		if i == 0 {
			h.mergePending()
		}
		h.wmu.Lock()
		start := h.wnext
		end := min(start+fanOutSlice, len(h.work))
		h.wnext = end
		part := h.work[start:end]
		h.wmu.Unlock()
		if len(part) == 0 {
			break
		}
		for _, s := range part {
			s.pmu.Lock()
			s.took = h.runID
			fs := s.pend
			s.pmu.Unlock()
			var queued int
			var full bool
			queued, full, buf = h.offer(s, fs, now, buf)
			r.n += uint64(queued)
			if full {
				r.full = append(r.full, s)
			}
			// Merges no longer touch pend once the stream is taken.
			clear(fs)
			if cap(fs) > 16 {
				s.pend = nil // a one-off backlog
			} else {
				s.pend = fs[:0]
			}
		}
	}
	if cap(buf) > 4*writeChunk {
		buf = nil
	}
	h.scratch[i] = buf
}

// writeFastLocked writes the first frames of fs (at most QueueLen, so a
// leftover never holds more than the queue would) straight to s's socket
// in one chunk, unless the stream's goroutine holds the socket or bytes
// are carried over. The caller holds s.q.mu and has checked that nothing
// is queued; writeFastLocked unlocks it when it writes (k > 0) and leaves
// it locked when it does not.
func (h *Hub) writeFastLocked(s *Subscription, fw *fastWriter, fs []*queued, buf []byte) (k int, _ []byte) {
	if !fw.wmu.TryLock() {
		return 0, buf
	}
	if fw.carry != nil {
		fw.wmu.Unlock()
		return 0, buf
	}
	q := &s.q
	q.mu.Unlock()
	k = min(len(fs), q.max)
	var wrote, of, whole int
	buf, wrote, of, whole = fw.write(q, fs[:k], buf)
	fw.wmu.Unlock()
	if whole > 0 && h.hooks.afterWrite != nil {
		h.hooks.afterWrite(s, whole)
	}
	if wrote < of && h.hooks.afterCarry != nil {
		h.hooks.afterCarry(s, wrote, of)
	}
	return k, buf
}
