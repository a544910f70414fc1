package room_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// pagingDoc mixes one-, two-, three- and four-byte characters and CRLF and
// LF line endings, so that byte and line cuts land everywhere.
const pagingDoc = "# Notes\n\nhé llo wörld € 😀\r\nsecond line\nthird ☃ line\n\n## Plan\n\nstep 😀 one\nstep two\r\nstep three\n"

func TestReadPaging(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withDocText(pagingDoc))
	a := d.join("a", room.CapRead)
	readAt := func(in room.ReadInput) (room.ReadResult, error) {
		return read(d.env, func(eng *room.Engine, q room.Querier) (room.ReadResult, error) {
			return eng.Read(t.Context(), q, a, in)
		})
	}
	whole := pagingDoc
	plan := pagingDoc[strings.Index(pagingDoc, "## Plan"):]

	// pages follows next_offset from 0 and returns every page read.
	pages := func(t *testing.T, in room.ReadInput) []room.ReadResult {
		t.Helper()
		var out []room.ReadResult
		for range 1000 {
			res, err := readAt(in)
			if err != nil {
				t.Fatalf("offset %d: %v", in.Offset, err)
			}
			out = append(out, res)
			if !res.Truncated {
				if res.NextOffset != nil {
					t.Fatalf("a page that is not truncated has next_offset %d", *res.NextOffset)
				}
				return out
			}
			if res.NextOffset == nil || *res.NextOffset <= in.Offset {
				t.Fatalf("truncated page at %d has next_offset %v: no progress", in.Offset, res.NextOffset)
			}
			in.Offset = *res.NextOffset
		}
		t.Fatal("paging did not end")
		return nil
	}

	for _, tc := range []struct {
		name, section, text string
	}{{"the whole document", "", whole}, {"a section", "Notes/Plan", plan}} {
		for _, maxBytes := range []int{4, 5, 7, 13} {
			t.Run(fmt.Sprintf("%s: pages of %d bytes put back together are the text", tc.name, maxBytes), func(t *testing.T) {
				var b strings.Builder
				for _, p := range pages(t, room.ReadInput{Section: tc.section, MaxBytes: maxBytes}) {
					if len(p.Content) > maxBytes {
						t.Fatalf("a %d-byte page for max_bytes %d", len(p.Content), maxBytes)
					}
					if p.Offset != b.Len() {
						t.Fatalf("page says it starts at %d, the pages so far end at %d", p.Offset, b.Len())
					}
					b.WriteString(p.Content)
				}
				if b.String() != tc.text {
					t.Fatalf("pages joined = %q, want %q", b.String(), tc.text)
				}
			})
		}
		t.Run(tc.name+": line pages start on a line and cover every line", func(t *testing.T) {
			var got []string
			for _, p := range pages(t, room.ReadInput{Section: tc.section, MaxLines: 2}) {
				if p.Offset > 0 && tc.text[p.Offset-1] != '\n' {
					t.Fatalf("page at %d does not start on a line", p.Offset)
				}
				c := p.Content
				if !p.Truncated {
					c = strings.TrimSuffix(c, "\n") // the last page keeps the text's final newline
				}
				got = append(got, strings.Split(c, "\n")...)
			}
			want := strings.Split(strings.TrimSuffix(tc.text, "\n"), "\n")
			for i := range want {
				want[i] = strings.TrimSuffix(want[i], "\r") // the line ending that ends a page is dropped
			}
			for i := range got {
				got[i] = strings.TrimSuffix(got[i], "\r")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("lines read %q, want %q", got, want)
			}
		})
	}

	t.Run("an offset inside a character starts at that character", func(t *testing.T) {
		at := strings.Index(whole, "😀")
		for _, off := range []int{at + 1, at + 2, at + 3} {
			res, err := readAt(room.ReadInput{Offset: off, MaxBytes: 4})
			if err != nil {
				t.Fatal(err)
			}
			if res.Offset != at || res.Content != "😀" {
				t.Fatalf("offset %d: page at %d %q, want at %d %q", off, res.Offset, res.Content, at, "😀")
			}
		}
	})
	t.Run("an offset at the end is an empty last page", func(t *testing.T) {
		res, err := readAt(room.ReadInput{Section: "Plan", Offset: len(plan)})
		if err != nil || res.Content != "" || res.Truncated || res.NextOffset != nil {
			t.Fatalf("%+v %v", res, err)
		}
	})
	for _, tc := range []struct {
		name string
		in   room.ReadInput
	}{
		{"an offset past the end is invalid_request", room.ReadInput{Section: "Plan", Offset: len(plan) + 1}},
		{"a negative offset is invalid_request", room.ReadInput{Offset: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAt(tc.in)
			wantKind(t, err, room.KindInvalidRequest)
			if f := errField(t, err, "field"); f != "offset" {
				t.Errorf("field = %v, want offset", f)
			}
		})
	}
	t.Run("an answer that is not truncated keeps its old shape", func(t *testing.T) {
		res, err := readAt(room.ReadInput{Section: "Plan"})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		b, _ := json.Marshal(res)
		json.Unmarshal(b, &m)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		if want := []string{"content", "section", "truncated", "version", "workspace_id"}; !slices.Equal(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
	})
	t.Run("a selector over MaxSelectorBytes is invalid_request and not quoted", func(t *testing.T) {
		long := strings.Repeat("z", room.MaxSelectorBytes+1)
		_, err := readAt(room.ReadInput{Section: long})
		wantKind(t, err, room.KindInvalidRequest)
		if strings.Contains(err.Error(), "zzzz") {
			t.Fatalf("the error quotes the selector: %.200s", err.Error())
		}
	})
}
