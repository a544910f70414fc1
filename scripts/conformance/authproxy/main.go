// Command authproxy is a loopback reverse proxy for the MCP conformance run:
// the official suite cannot send an Authorization header, so this adds the
// bearer session to every request and changes nothing else (the Host and
// Origin headers, the body and the streaming of responses pass through).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

// maxBody bounds a request body the proxy buffers: above the room's own
// bound (1 MiB), so the room, not the proxy, answers an oversize body.
const maxBody = 8 << 20

func main() {
	target := flag.String("target", "", "the ce ingress URL, e.g. http://127.0.0.1:4100")
	tokenFile := flag.String("token-file", "", "file holding the session token")
	addrFile := flag.String("addr-file", "", "write the proxy's address here once listening")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		log.Fatalf("authproxy: bad --target %q", *target)
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatalf("authproxy: %v", err)
	}
	token := string(tok)
	for len(token) > 0 && (token[len(token)-1] == '\n' || token[len(token)-1] == '\r') {
		token = token[:len(token)-1]
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep the client's Host: the DNS-rebinding check depends on it
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("authproxy: %v", err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o600); err != nil {
			log.Fatalf("authproxy: %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "authproxy: %s -> %s\n", ln.Addr(), u)
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request body here, before the round trip. Handing the
		// server's body to the transport as it is let the transport's
		// writer goroutine hit its end while this handler was still copying
		// the answer, and about 1 request in 70 then lost its answer
		// midway ("use of closed network connection" on the upstream read),
		// whatever server was behind: the conformance suite saw failures
		// that were the proxy's. A buffered body never races.
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil || len(b) > maxBody {
				http.Error(w, "authproxy: cannot read the request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		proxy.ServeHTTP(w, r)
	})))
}
