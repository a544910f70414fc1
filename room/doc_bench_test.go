package room_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

const benchSections = 500

// benchDoc is a 1 MiB document of 500 sections ("## Section 000" …).
func benchDoc() string {
	var b strings.Builder
	b.WriteString("# Bench\n\n")
	for i := range benchSections {
		b.WriteString(benchSection(i, "original"))
	}
	return b.String()
}

// benchSection is one ~2 KiB section.
func benchSection(i int, word string) string {
	head := fmt.Sprintf("## Section %03d\n\n", i)
	line := fmt.Sprintf("%s text of section %03d, long enough to look like prose.\n", word, i)
	body := strings.Repeat(line, (1<<20)/benchSections/len(line))
	return head + body + "\n"
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkProposalRoundTrip: propose one section → approve → commit, each a
// command through the actor (three transactions, one file write), on a
// 1 MiB document of 500 sections.
func BenchmarkProposalRoundTrip(b *testing.B) {
	doc := benchDoc()
	d := newDocRoom(b, withRealClock(), withDocText(doc))
	if n := len(doc); n < 1<<20-64<<10 || n > 1<<20+64<<10 {
		b.Fatalf("document is %d bytes", n)
	}
	a := d.join("agent", agentCaps...)
	op := d.op()
	i := 0
	for b.Loop() {
		sec := fmt.Sprintf("Section %03d", i%benchSections)
		pr, err := d.propose(a, room.ProposeInput{Target: sec, BaseVersion: int64(i + 1), Summary: "bench",
			Change: room.ChangeInput{Content: refOf(benchSection(i%benchSections, fmt.Sprintf("edit%d", i))), Section: sec}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.review(op, pr.ProposalID, true); err != nil {
			b.Fatal(err)
		}
		if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportRate(b)
}

// BenchmarkReadSection: the engine's Read of one section of the same
// document, through a read transaction (as every front door reads).
func BenchmarkReadSection(b *testing.B) {
	d := newDocRoom(b, withRealClock(), withDocText(benchDoc()))
	a := d.join("agent", agentCaps...)
	ctx := context.Background()
	readOne := func() (room.ReadResult, error) {
		return read(d.env, func(eng *room.Engine, q room.Querier) (room.ReadResult, error) {
			return eng.Read(ctx, q, a, room.ReadInput{Section: "Section 250"})
		})
	}
	first, err := readOne()
	if err != nil || !strings.HasPrefix(first.Content, "## Section 250\n") || first.Truncated {
		b.Fatalf("read %q… %v", first.Content[:min(40, len(first.Content))], err)
	}
	for b.Loop() {
		if _, err := readOne(); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}
