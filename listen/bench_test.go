package listen

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchParams is a task snapshot of typical size.
var benchParams = json.RawMessage(`{"taskId":"task_01J9ZK3M4N5P6Q7R8S9T0V1W2X","status":"input_required","createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:05:00Z","ttlMs":3600000,"statusMessage":"waiting for review of section 2","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Accept the handoff?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}}}`)

// BenchmarkPublishFanout is the bare fan-out loop: one message to N
// subscribers of the same topic, timed from Publish until the broadcaster has
// put it in every queue. ns/sub is the per-subscriber cost.
func BenchmarkPublishFanout(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchFanout(b, n, func(int) string { return "events" }, "events")
		})
	}
}

// BenchmarkPublishOneOfMany shows the topic index at work: N subscribers each
// on their own task topic, one message to one of them. It should not grow
// with N.
func BenchmarkPublishOneOfMany(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchFanout(b, n, func(i int) string { return fmt.Sprintf("task:%d", i) }, fmt.Sprintf("task:%d", n/2))
		})
	}
}

// BenchmarkPublishFanoutFiltered is BenchmarkPublishFanout with every
// subscriber holding a Filter that looks at the change (as the observe
// door's does) and admits it: the cost a per-subscriber rule adds to the
// fan-out. Subscribers without a Filter pay one nil check.
func BenchmarkPublishFanoutFiltered(b *testing.B) {
	admit := func(m Message) bool { _, ok := m.Change.(testChange); return ok }
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchFanoutWith(b, n, func(int) string { return "events" }, "events", admit)
		})
	}
}

func benchFanout(b *testing.B, n int, topicOf func(int) string, target string) {
	benchFanoutWith(b, n, topicOf, target, nil)
}

func benchFanoutWith(b *testing.B, n int, topicOf func(int) string, target string, filter func(Message) bool) {
	const drainEvery = 256 // the default QueueLen
	done := make(chan uint64, 1)
	h := newHub(Config{QueueLen: drainEvery, MaxStreamsPerSession: -1, Encode: testEncode}, hooks{afterBatch: func(seq uint64) { done <- seq }})
	defer h.Close()
	subs := make([]*Subscription, n)
	for i := range subs {
		s, err := h.Subscribe(SubscribeRequest{Topics: []string{topicOf(i)}, Filter: filter})
		if err != nil {
			b.Fatal(err)
		}
		subs[i] = s
	}
	batch := Batch{Messages: []Message{{Topic: target, Change: testChange{testMethod, benchParams}}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h.Publish(batch)
		<-done
		if (i+1)%drainEvery == 0 {
			b.StopTimer()
			for _, s := range subs {
				s.q.release(s.q.take())
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	if st := h.Stats(); st.Dropped != 0 {
		b.Fatalf("subscribers dropped during benchmark: %+v", st)
	}
	if target == "events" {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/sub")
	}
}
