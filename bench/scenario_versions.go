package main

// versionsResult placeholder
type versionsResult struct{}

func (r *report) judgeVersions(add func(name, goal string, measured float64, ok, have bool, detail string)) {
	add("sidecar growth per one-line commit, 1 MiB document (KiB)", "≤ 16", 0, false, false, "versions not run")
}
