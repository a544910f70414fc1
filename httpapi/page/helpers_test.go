package page_test

import (
	"fmt"
	"net"
	"net/http/httptest"
)

// ownerCookie is the owner page's cookie as a browser sees it.
const ownerCookie = "commonroom_owner"

// serverPort is a test server's port as text.
func serverPort(s *httptest.Server) string {
	return fmt.Sprint(s.Listener.Addr().(*net.TCPAddr).Port)
}
