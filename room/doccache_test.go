package room

import (
	"strings"
	"testing"
)

// The parsed-version cache keeps the newest version always, at most four,
// and past docCacheSpare bytes of older text only the newest: four copies
// of a 200 MB document were kept before (issue 17).
func TestDocCache_BoundedByVersionsAndBytes(t *testing.T) {
	big := strings.Repeat("x", docCacheSpare/2+1) // shared by every Doc below: one allocation
	cases := []struct {
		name string
		text string
		puts []int64
		want []int64
	}{
		{"small texts keep the newest four", "t", []int64{1, 2, 3, 4, 5}, []int64{2, 3, 4, 5}},
		{"large texts keep what fits the spare bytes", big, []int64{1, 2, 3}, []int64{2, 3}},
		{"a reader putting an older version never evicts the newest", big, []int64{3, 1, 2}, []int64{2, 3}},
		{"a text larger than the spare bytes is kept alone", big + big, []int64{1, 2}, []int64{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c docCache
			for _, v := range tc.puts {
				c.put(&Doc{Version: v, Content: tc.text})
			}
			var got []int64
			for _, d := range c.docs {
				got = append(got, d.Version)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("cached versions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] || c.get(tc.want[i]) == nil {
					t.Fatalf("cached versions %v, want %v", got, tc.want)
				}
			}
		})
	}
}
