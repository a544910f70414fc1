package page_test

// The page door on its own, mounted on a real HTTP server over a real room
// (SQLite in t.TempDir()), with a key store written here: what the door
// does with the cookie the store hands it, the page's headers, and that
// every refusal goes through the injected error writer. The door behind the
// front door's wiring (its credential store, Host/Origin guard, the browser)
// is httpapi/page_test.go and e2e/owner-page.test.mjs.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/page"
	"github.com/commonroom/ce/room"
)

// oneKey is a key store holding one unspent key and the cookie it is
// exchanged for.
type oneKey struct {
	mu     sync.Mutex
	key    string
	cookie *http.Cookie
}

func (k *oneKey) Redeem(_ *http.Request, key string) (*http.Cookie, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key == "" || key != k.key {
		return nil, nil
	}
	k.key = ""
	return k.cookie, nil
}

// Viewer is the operator for the holder of the cookie, as the owner
// listener's store answers.
func (k *oneKey) Viewer(r *http.Request) (room.Principal, error) {
	c, err := r.Cookie(k.cookie.Name)
	if err != nil || c.Value != k.cookie.Value {
		return room.Principal{}, room.Errorf(room.KindUnauthorized, "Open the owner page through the link `ce serve` printed.")
	}
	return room.Operator("host"), nil
}

// doorFixture is the door on a real server; errs records what it handed
// the injected error writer.
type doorFixture struct {
	srv    *httptest.Server
	keys   *oneKey
	mu     sync.Mutex
	errs   []error
	client *http.Client
}

func newDoor(t *testing.T) *doorFixture {
	t.Helper()
	ctx := context.Background()
	doc := filepath.Join(t.TempDir(), "trip.md")
	if err := os.WriteFile(doc, []byte("# Trip plan\n\n## Goals\n\nTo be written.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	eng.SetHints([]room.Hint{{Type: "loopback", Address: "127.0.0.1", Port: 1, Mode: "local"}})
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st, HostName: "host"})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	f := &doorFixture{
		keys: &oneKey{key: "k1", cookie: &http.Cookie{Name: "c", Value: "v", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: 60}},
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
	d := page.New(page.Config{Room: rm, Keys: f.keys, SendError: func(w http.ResponseWriter, r *http.Request, err error) {
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
		status := http.StatusInternalServerError
		switch room.AsError(err).Kind {
		case room.KindNotFound, room.KindVersionNotFound:
			status = http.StatusNotFound
		case room.KindInvalidRequest:
			status = http.StatusBadRequest
		}
		http.Error(w, "refused", status)
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.Index)
	mux.HandleFunc("GET /page/document", d.Document)
	mux.HandleFunc("GET /page/", d.Asset)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.srv.Close()
		rm.Close(ctx)
		st.Close()
	})
	return f
}

func (f *doorFixture) get(t *testing.T, method, path string, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	res, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func (f *doorFixture) refusals() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// TestDoorExchangesTheKeyForTheStoresCookie: the door sets exactly the
// cookie the store hands it (the store owns its attributes), drops the key
// from the address bar, spends the key once, and shows the room only to a
// holder of the cookie.
func TestDoorExchangesTheKeyForTheStoresCookie(t *testing.T) {
	f := newDoor(t)
	res, _ := f.get(t, "GET", "/?key=k1", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("exchange: %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if got, want := res.Header.Get("Set-Cookie"), f.keys.cookie.String(); got != want {
		t.Errorf("Set-Cookie %q, want the store's %q", got, want)
	}
	res, body := f.get(t, "GET", "/?key=k1", nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "already used") || res.Header.Get("Set-Cookie") != "" {
		t.Errorf("spent key: %d %q", res.StatusCode, body)
	}
	res, body = f.get(t, "GET", "/", nil)
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "Trip plan") {
		t.Errorf("no cookie: %d %q", res.StatusCode, body)
	}
	res, body = f.get(t, "GET", "/", &http.Cookie{Name: "c", Value: "forged"})
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "Trip plan") {
		t.Errorf("forged cookie: %d %q", res.StatusCode, body)
	}
	res, body = f.get(t, "GET", "/", &http.Cookie{Name: "c", Value: "v"})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %d %q", res.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	for _, want := range []string{"<h1>trip</h1>", "loopback · local · not encrypted", `<li class="lvl-1">Goals</li>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if errs := f.refusals(); len(errs) != 0 {
		t.Errorf("the error writer was called: %v", errs)
	}
}

// TestDoorAssetsAndRefusals: the assets are the files beside this test,
// HEAD sends none of the body, and anything else under /page/ is refused
// through the injected error writer as not found.
func TestDoorAssetsAndRefusals(t *testing.T) {
	f := newDoor(t)
	for _, name := range []string{"page.css", "page.js", "favicon.svg"} {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		res, body := f.get(t, "GET", "/page/"+name, nil)
		if res.StatusCode != http.StatusOK || body != string(want) || res.Header.Get("ETag") == "" {
			t.Errorf("GET %s: %d, %d bytes, ETag %q", name, res.StatusCode, len(body), res.Header.Get("ETag"))
		}
		res, body = f.get(t, "HEAD", "/page/"+name, nil)
		if res.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s: %d, %d bytes", name, res.StatusCode, len(body))
		}
	}
	for _, p := range []string{"/page/index.html", "/page/door.go", "/page/x/page.js"} {
		before := len(f.refusals())
		res, _ := f.get(t, "GET", p, nil)
		errs := f.refusals()
		if res.StatusCode != http.StatusNotFound || len(errs) != before+1 {
			t.Fatalf("GET %s: %d, %d refusals", p, res.StatusCode, len(errs)-before)
		}
		var e *room.Error
		if !errors.As(errs[len(errs)-1], &e) || e.Kind != room.KindNotFound || !strings.Contains(e.Message, p) {
			t.Errorf("GET %s refused with %v, want not_found", p, errs[len(errs)-1])
		}
	}
}

// TestDoorDocument: the rendered document needs the cookie; a bad version
// is refused through the error writer; an unknown one is not found.
func TestDoorDocument(t *testing.T) {
	f := newDoor(t)
	cookie := &http.Cookie{Name: "c", Value: "v"}
	res, body := f.get(t, "GET", "/page/document", nil)
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "Goals") {
		t.Fatalf("no cookie: %d %q", res.StatusCode, body)
	}
	res, body = f.get(t, "GET", "/page/document", cookie)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-path=\"Trip plan/Goals\"`) || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("with the cookie: %d %q", res.StatusCode, body)
	}
	for _, tc := range []struct {
		name, query string
		status      int
	}{
		{"not_a_number_is_400", "?version=two", http.StatusBadRequest},
		{"zero_is_400", "?version=0", http.StatusBadRequest},
		{"negative_is_400", "?version=-1", http.StatusBadRequest},
		{"overflowing_is_400", "?version=99999999999999999999", http.StatusBadRequest},
		{"unknown_is_404", "?version=7", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.refusals())
			res, _ := f.get(t, "GET", "/page/document"+tc.query, cookie)
			if res.StatusCode != tc.status || len(f.refusals()) != before+1 {
				t.Fatalf("%d (want %d), %d refusals", res.StatusCode, tc.status, len(f.refusals())-before)
			}
		})
	}
}
