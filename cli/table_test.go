package cli

import (
	"bytes"
	"testing"
)

func TestPrintTable(t *testing.T) {
	type row struct{ a, b string }
	line := func(r row) string { return r.a + "\t" + r.b }
	cases := []struct {
		name   string
		header string
		rows   []row
		want   string
	}{
		{"no rows prints the empty message", "A\tB", nil, "nothing here\n"},
		{"rows are aligned under the header", "ID\tNAME", []row{{"1", "x"}, {"12345", "yy"}},
			"ID     NAME\n1      x\n12345  yy\n"},
		{"no header prints the rows only", "", []row{{"a", "b"}}, "a  b\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			printTable(&buf, "nothing here", c.header, c.rows, line)
			if buf.String() != c.want {
				t.Errorf("got %q, want %q", buf.String(), c.want)
			}
		})
	}
}
