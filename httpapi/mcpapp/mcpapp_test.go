package mcpapp

import (
	"regexp"
	"strings"
	"testing"
)

func TestDeclared(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want bool
	}{
		{"the MCP App MIME type among others declares", `{"mimeTypes":["text/plain","text/html;profile=mcp-app"]}`, true},
		{"absent is not a declaration", ``, false},
		{"an empty object is not a declaration", `{}`, false},
		{"another MIME type only is not a declaration", `{"mimeTypes":["text/html"]}`, false},
		{"mimeTypes as a string is not a declaration", `{"mimeTypes":"text/html;profile=mcp-app"}`, false},
		{"true is not a declaration", `true`, false},
		{"malformed JSON is not a declaration", `{"mimeTypes":[`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Declared([]byte(c.raw)); got != c.want {
				t.Errorf("Declared(%s) = %v, want %v", c.raw, got, c.want)
			}
		})
	}
}

// The view is one self-contained document: its only script and style are
// inline and allowed by hash, it names no other origin, loads nothing, and
// puts room text into the page only as text.
func TestHTMLIsSelfContained(t *testing.T) {
	doc := HTML()
	t.Run("the CSP meta allows exactly the inline script and style, by hash", func(t *testing.T) {
		if !strings.Contains(doc, `<meta http-equiv="Content-Security-Policy" content="`+CSP()+`">`) {
			t.Fatal("no CSP meta with the policy")
		}
		for _, want := range []string{"default-src 'none'", "connect-src 'none'", "script-src '" + hash(pageScript) + "'", "style-src '" + hash(pageStyle) + "'"} {
			if !strings.Contains(CSP(), want) {
				t.Errorf("CSP lacks %q: %s", want, CSP())
			}
		}
		if !strings.Contains(doc, "<script>"+pageScript+"</script>") || !strings.Contains(doc, "<style>"+pageStyle+"</style>") {
			t.Error("the script or the style is not inlined byte for byte (its hash would not match)")
		}
		if strings.Count(doc, "<script") != 1 || strings.Count(doc, "<style") != 1 || strings.Contains(doc, "{{") {
			t.Error("a second script or style, or a placeholder left")
		}
	})
	t.Run("nothing is loaded from anywhere", func(t *testing.T) {
		for _, re := range []string{`(?i)https?://`, `(?i)\ssrc\s*=`, `(?i)\shref\s*=`, `(?i)@import`, `(?i)url\(`, `\bfetch\(`, `XMLHttpRequest`, `WebSocket`, `EventSource`, `\bimport\(`} {
			if m := regexp.MustCompile(re).FindString(doc); m != "" {
				t.Errorf("the document holds %q", m)
			}
		}
	})
	t.Run("room text goes in as text only, and only the host is listened to", func(t *testing.T) {
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('on", ".href"} {
			if strings.Contains(pageScript, bad) {
				t.Errorf("board.js uses %s", bad)
			}
		}
		if !strings.Contains(pageScript, "ev.source !== host") {
			t.Error("board.js does not check a message's source against the host window")
		}
	})
}
