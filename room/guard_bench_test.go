package room_test

import (
	"fmt"
	"testing"

	"github.com/commonroom/ce/room"
)

// BenchmarkSectionCommit: one raw commit of one section through the actor
// (a transaction and a file write), back to back, on the small test
// document and on the 1 MiB document of 500 sections. It measures what the
// guarded replace costs per commit (issue 13 item 1: the extra read of the
// document, the exchange and the read-back).
func BenchmarkSectionCommit(b *testing.B) {
	for _, size := range []struct {
		name, doc, section string
		content            func(i int) string
	}{
		{"small", testDoc, "Goals", func(i int) string { return fmt.Sprintf("## Goals\n\nedit %d\n\n", i) }},
		{"1MiB", benchDoc(), "Section 250", func(i int) string { return benchSection(250, fmt.Sprintf("edit%d", i)) }},
	} {
		b.Run(size.name, func(b *testing.B) {
			d := newDocRoom(b, withRealClock(), withDocText(size.doc))
			op := d.op()
			v := int64(1)
			for b.Loop() {
				res, err := d.commit(op, room.CommitInput{BaseVersion: refOf(v), Summary: "bench", Target: size.section,
					Content: refOf(size.content(int(v)))})
				if err != nil {
					b.Fatal(err)
				}
				v = res.Version
			}
			reportRate(b)
		})
	}
}
