//go:build linux && (amd64 || arm64)

package sock

import (
	"encoding/binary"
	"net"
	"syscall"
	"unsafe"
)

// tcpiBytesAcked is the offset of tcpi_bytes_acked in struct tcp_info
// (Linux 4.1 and later): the fixed leading fields take 104 bytes, then two
// 64-bit pacing rates.
const tcpiBytesAcked = 120

// tcpProbe samples a TCP socket with ioctl(SIOCOUTQ) and getsockopt(TCP_INFO).
type tcpProbe struct{ rc syscall.RawConn }

// NewProbe returns a probe for c, or nil when c is not a TCP socket
// or the kernel is too old to report acknowledged bytes.
func NewProbe(c net.Conn) Probe {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &tcpProbe{rc: rc}
	if _, _, ok := p.Sample(); !ok {
		return nil
	}
	return p
}

func (p *tcpProbe) Sample() (queued int, acked uint64, ok bool) {
	err := p.rc.Control(func(fd uintptr) {
		var n int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n))); e != 0 {
			return
		}
		var info [256]byte
		l := uint32(len(info))
		if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&l)), 0); e != 0 || l < tcpiBytesAcked+8 {
			return
		}
		queued, acked, ok = int(n), binary.NativeEndian.Uint64(info[tcpiBytesAcked:]), true
	})
	return queued, acked, ok && err == nil
}
