// Command authproxy is a loopback reverse proxy for the MCP conformance run:
// the official suite cannot send an Authorization header, so this adds the
// bearer session to every request and changes nothing else (the Host and
// Origin headers, the body and the streaming of responses pass through).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

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
	log.Fatal(http.Serve(ln, proxy))
}
