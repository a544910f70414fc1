// Package crashtest holds the crash test of issue #8: it builds the real `ce`
// binary, drives a served room with many concurrent HTTP clients, SIGKILLs
// the server at random moments, restarts it on the same file, and checks
// after every restart — through a read-only SQLite connection and through the
// API — that every acknowledged mutation survived, that state changes and
// their events are consistent, that the active-task cap held, that the
// sidecar is intact and that the Markdown file's text was never lost.
//
// Everything lives in the _test.go files; run it with
//
//	go test -v ./crashtest/
//	CE_CRASH_KILLS=20 CE_CRASH_SECONDS=60 CE_CRASH_SEED=42 go test -v ./crashtest/
package crashtest
