package mcptest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// RawPOST writes one POST /mcp on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded or repeated header values).
// The base headers (Host, JSON Content-Type, Accept, Connection: close,
// Content-Length) come first, then headerLines as they are.
func RawPOST(hostport string, headerLines []string, body []byte) (Response, error) {
	conn, err := net.DialTimeout("tcp", hostport, 5*time.Second)
	if err != nil {
		return Response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: %s\r\nConnection: close\r\nContent-Length: %d\r\n", hostport, Accept, len(body))
	for _, l := range headerLines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return Response{}, err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: res.StatusCode, Header: res.Header, Raw: rb}, nil
}
