package main

import (
	"encoding/json"
	"math"
	"testing"
)

// TestWriterCPUPerCommand: the writer's own cpu_seconds is used when the
// room reports it in both readings; otherwise the process's CPU per
// command, labelled "process"; no commands, no figure.
func TestWriterCPUPerCommand(t *testing.T) {
	metrics := func(doc string) roomMetrics {
		var m roomMetrics
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	use := cpuUse{CeSeconds: 2}
	for _, c := range []struct {
		name     string
		m0, m1   string
		wantUs   float64
		wantFrom string
	}{
		{"writer cpu_seconds reported: the writer's own", `{"writer":{"commands":1000,"cpu_seconds":1.5}}`, `{"writer":{"commands":11000,"cpu_seconds":2.5}}`, 100, "writer"},
		{"no cpu_seconds: the process's, labelled", `{"writer":{"commands":1000}}`, `{"writer":{"commands":11000}}`, 200, "process"},
		{"cpu_seconds in one reading only: the process's", `{"writer":{"commands":0}}`, `{"writer":{"commands":10000,"cpu_seconds":9}}`, 200, "process"},
		{"no commands: no figure", `{"writer":{"commands":5,"cpu_seconds":1}}`, `{"writer":{"commands":5,"cpu_seconds":1}}`, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			us, from := writerCPUPerCommand(metrics(c.m0), metrics(c.m1), use)
			if math.Abs(us-c.wantUs) > 1e-9 || from != c.wantFrom {
				t.Fatalf("got %v µs from %q, want %v from %q", us, from, c.wantUs, c.wantFrom)
			}
		})
	}
}

// TestPerRequestUs: CPU per request in µs, and no figure when the window
// holds too little server CPU to count in 10 ms ticks.
func TestPerRequestUs(t *testing.T) {
	for _, c := range []struct {
		name string
		sec  float64
		reqs int64
		want float64
	}{
		{"enough CPU: seconds per request in µs", 0.5, 10000, 50},
		{"too little CPU to count: no figure", 0.05, 100, 0},
		{"no requests: no figure", 1, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := (cpuUse{CeSeconds: c.sec}).perRequestUs(c.reqs); math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
