package room

import (
	"math/bits"
	"strconv"
)

// A LIMIT is written into a statement's text, never bound to a parameter.
// SQLite plans with the value bound to a LIMIT parameter, so binding one
// marks the statement expired: a cached statement with `LIMIT ?` is parsed
// and planned again on every run. For the inbox that re-preparing was half
// of the read's CPU (about 0.5 of 1 ms for a page of ten; issue 17), and
// history, handoff events, proposals and versions paid it too. TestListingsAreNotRepreparedOnEachRun
// holds every listing to this.

// limitSQL is a LIMIT clause for a bound fixed for the life of the room (a
// Limits field or a constant), so the statement has one text per room.
func limitSQL(n int) string { return " LIMIT " + strconv.Itoa(max(n, 0)) }

// pageLimit is the LIMIT to write for a page of n rows a caller chose: n
// rounded up to a power of two, so the page sizes callers ask for make a
// handful of statement texts (about log2 of the largest), not one each.
// The statement may then return more than n rows; the caller keeps n.
func pageLimit(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// firstN is s cut to its first n items.
func firstN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// lastN is s cut to its last n items.
func lastN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
