package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A listen stream is held with a raw net.Conn and http.ReadResponse rather
// than an http.Client: 10,000 of them then cost one goroutine and two small
// buffers each, with no transport bookkeeping, and the bench controls the
// socket (a tiny receive buffer for the stalled-reader test).

// Stream end states.
const (
	streamOpen     int32 = iota
	streamDropped        // EOF without the final result: the room dropped it
	streamGraceful       // the final result arrived: the room ended it on purpose
	streamClosed         // the bench closed it
	streamBroken         // a framing or protocol error on our side of the wire
)

// frameSink is where a stream reports what it receives; the fan-out
// scenario swaps the current phase in and out. size is the frame's SSE
// line with its terminating blank line, as the server wrote it.
type frameSink interface {
	frame(recvAt time.Time, lastUpdated time.Time, size int)
}

// listenStream is one open subscriptions/listen, read either by a
// goroutine of its own (read) or by the epoll receiver.
type listenStream struct {
	conn   net.Conn      // nil once the epoll receiver owns the socket
	body   *bufio.Reader // the goroutine receiver's body reader
	closer func()        // ends the stream from our side
	// localPort and remotePort are the connection's two ends, kept for
	// /proc/net/tcp lookups after the net.Conn is gone.
	localPort, remotePort int
	frames                atomic.Int64 // notifications/tasks received
	other                 atomic.Int64 // frames of any other kind after the ack (must stay 0)
	state                 atomic.Int32
	closed                atomic.Bool
	done                  chan struct{}
	sink                  *atomic.Pointer[frameSink]
	err                   error // set before done is closed, when state is streamBroken
}

type listenOptions struct {
	addr     string // host:port of the ingress listener
	token    string
	id       int // the listen request's JSON-RPC id
	taskIDs  []string
	rcvBuf   int // SO_RCVBUF before connect; 0 keeps the default
	deadline time.Duration
}

// openListen sends subscriptions/listen and reads the response head and the
// acknowledgement, which must list every requested task (the session can
// see them all). The caller then starts read (or, for the stalled reader,
// never does).
func openListen(ctx context.Context, o listenOptions) (*listenStream, error) {
	conn, _, resp, err := dialListen(ctx, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	s := newListenStream(conn)
	s.body = bufio.NewReaderSize(resp.Body, 4096)
	line, err := s.line()
	if err != nil {
		return nil, fmt.Errorf("reading the acknowledgement: %w", err)
	}
	if err := checkAck(line, o); err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	ok = true
	return s, nil
}

func newListenStream(conn net.Conn) *listenStream {
	s := &listenStream{conn: conn, done: make(chan struct{})}
	s.localPort, s.remotePort = connPorts(conn)
	s.closer = func() { conn.Close() }
	return s
}

// dialListen connects, sends subscriptions/listen and reads the response
// head; the body is not touched (br holds whatever of it came with the
// head). A status other than 200 is an *rpcError. On success the caller
// owns conn, whose deadline is still set for the acknowledgement.
func dialListen(ctx context.Context, o listenOptions) (net.Conn, *bufio.Reader, *http.Response, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if o.rcvBuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.rcvBuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.DialContext(ctx, "tcp", o.addr)
	if err != nil {
		return nil, nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	dl := o.deadline
	if dl == 0 {
		dl = 30 * time.Second
	}
	conn.SetDeadline(time.Now().Add(dl))
	body := encodeRequest(int64(o.id), "subscriptions/listen", map[string]any{
		"notifications": map[string]any{"taskIds": o.taskIDs},
	})
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", o.addr)
	fmt.Fprintf(&req, "Authorization: Bearer %s\r\nMCP-Protocol-Version: %s\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n", o.token, protocolVersion, len(body))
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		return nil, nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, nil, nil, &rpcError{Status: resp.StatusCode, Body: "subscriptions/listen: " + clip(b)}
	}
	ok = true
	return conn, br, resp, nil
}

// checkAck checks the stream's first frame: the acknowledgement, listing
// every task asked for.
func checkAck(line []byte, o listenOptions) error {
	var ack struct {
		Method string `json:"method"`
		Params struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		} `json:"params"`
	}
	data, isData := bytes.CutPrefix(line, []byte("data: "))
	if !isData || json.Unmarshal(data, &ack) != nil || ack.Method != "notifications/subscriptions/acknowledged" {
		return fmt.Errorf("first frame is not the acknowledgement: %s", clip(line))
	}
	if len(ack.Params.Notifications.TaskIDs) != len(o.taskIDs) {
		return fmt.Errorf("acknowledged %d of %d tasks", len(ack.Params.Notifications.TaskIDs), len(o.taskIDs))
	}
	return nil
}

// line returns the next non-empty SSE line (without the newline), skipping
// keep-alive comments. Lines longer than the buffer are assembled.
func (s *listenStream) line() ([]byte, error) {
	for {
		b, err := s.body.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = s.body.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil {
			return nil, err
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(b) == 0 || b[0] == ':' {
			continue
		}
		return b, nil
	}
}

var (
	tasksMethod   = []byte(`"method":"notifications/tasks"`)
	lastUpdatedAt = []byte(`"lastUpdatedAt":"`)
	resultMember  = []byte(`"result":`)
)

// wireTimeLayout is how the room writes task times (room.WireTime).
const wireTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// read consumes frames until the stream ends, reporting each task
// notification to the current sink with its lastUpdatedAt, the commit's
// own timestamp (the goroutine receiver: one goroutine per stream).
func (s *listenStream) read() {
	defer close(s.done)
	for {
		b, err := s.line()
		if err != nil {
			s.ended(err)
			return
		}
		s.handle(b, time.Now())
	}
}

// ended sets the stream's end state from the error that ended its reading
// (io.EOF when the server closed it).
func (s *listenStream) ended(err error) {
	switch {
	case s.closed.Load():
		s.state.CompareAndSwap(streamOpen, streamClosed)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isConnReset(err):
		s.state.CompareAndSwap(streamOpen, streamDropped)
	default:
		s.err = err
		s.state.CompareAndSwap(streamOpen, streamBroken)
	}
}

// handle is one SSE line received at now: a task notification is counted
// and reported to the sink, the final result marks a graceful end, and
// anything else is a frame of an unexpected kind.
func (s *listenStream) handle(b []byte, now time.Time) {
	data, ok := bytes.CutPrefix(b, []byte("data: "))
	switch {
	case !ok:
		s.other.Add(1)
	case bytes.Contains(data, tasksMethod):
		var lu time.Time
		if i := bytes.Index(data, lastUpdatedAt); i >= 0 && len(data) >= i+len(lastUpdatedAt)+24 {
			at := data[i+len(lastUpdatedAt):]
			if j := bytes.IndexByte(at, '"'); j > 0 {
				lu, _ = time.Parse(wireTimeLayout, string(at[:j]))
			}
		}
		s.frames.Add(1)
		if s.sink != nil {
			if sink := s.sink.Load(); sink != nil {
				(*sink).frame(now, lu, len(b)+len("\n\n"))
			}
		}
	case bytes.Contains(data, resultMember):
		// The final result: the room ended the stream gracefully.
		s.state.CompareAndSwap(streamOpen, streamGraceful)
	default:
		s.other.Add(1)
	}
}

// close ends the stream from our side and waits for its reader, if any.
func (s *listenStream) close(reading bool) {
	s.closed.Store(true)
	s.closer()
	if reading {
		<-s.done
	}
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// hostPort turns the ingress URL into the address to dial.
func hostPort(ingressURL string) (string, error) {
	u, err := url.Parse(ingressURL)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// tcpStates names the /proc/net/tcp state codes the bench can meet.
var tcpStates = map[string]string{"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
	"07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}

// serverSocket reads /proc/net/tcp for the room's end of one loopback
// connection (local port serverPort, peer port clientPort): its TCP state
// and its send queue in bytes, what the room has written that the client
// has not read. It is the evidence for how long a stalled reader can hide
// in kernel buffers. ok is false if the socket is gone.
func serverSocket(serverPort, clientPort int) (state string, queued int64, ok bool) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", 0, false
	}
	want := fmt.Sprintf(":%04X", serverPort)
	peer := fmt.Sprintf(":%04X", clientPort)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[1], want) || !strings.HasSuffix(f[2], peer) {
			continue
		}
		tx, _, _ := strings.Cut(f[4], ":")
		v, _ := strconv.ParseInt(tx, 16, 64)
		st := tcpStates[f[3]]
		if st == "" {
			st = "state " + f[3]
		}
		return st, v, true
	}
	return "", 0, false
}

// loopbackQueues sums, over every connection to serverPort, the bytes the
// server has sent that the peer has not acknowledged or even been offered
// (its send queues) and the bytes that arrived at the clients but that they
// have not read yet (their receive queues): where a fan-out backlog sits
// when it is in neither process.
func loopbackQueues(serverPort int) (serverSend, clientRecv int64) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, 0
	}
	port := fmt.Sprintf(":%04X", serverPort)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		tx, rx, _ := strings.Cut(f[4], ":")
		switch {
		case strings.HasSuffix(f[1], port):
			v, _ := strconv.ParseInt(tx, 16, 64)
			serverSend += v
		case strings.HasSuffix(f[2], port):
			v, _ := strconv.ParseInt(rx, 16, 64)
			clientRecv += v
		}
	}
	return serverSend, clientRecv
}

// ports returns the two ends of a stream's connection.
func (s *listenStream) ports() (local, remote int) { return s.localPort, s.remotePort }

func connPorts(conn net.Conn) (local, remote int) {
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		local = a.Port
	}
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		remote = a.Port
	}
	return local, remote
}
