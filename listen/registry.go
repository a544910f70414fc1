package listen

import (
	"slices"
	"sync"
)

// registry is who listens to what. Its mu guards the indexes and every
// Subscription's topics and end; the broadcaster holds it for one lookup
// at a time, and nobody holds it across network I/O.
type registry struct {
	mu     sync.Mutex
	closed bool // Close has begun: no Subscribe succeeds
	// byTopic maps a topic to its subscribers, each with the sequence of the
	// last batch published before it took the topic: older batches are not
	// its to see.
	byTopic   map[string]map[*Subscription]uint64
	bySession map[string]map[*Subscription]struct{}
	all       map[*Subscription]struct{}
}

func newRegistry() registry {
	return registry{
		byTopic:   make(map[string]map[*Subscription]uint64),
		bySession: make(map[string]map[*Subscription]struct{}),
		all:       make(map[*Subscription]struct{}),
	}
}

// addLocked registers s under its session and topics, offered only the
// batches published after the one numbered after.
func (r *registry) addLocked(s *Subscription, after uint64) {
	r.all[s] = struct{}{}
	if s.session != "" {
		set := r.bySession[s.session]
		if set == nil {
			set = make(map[*Subscription]struct{})
			r.bySession[s.session] = set
		}
		set[s] = struct{}{}
	}
	r.indexLocked(s, s.topics, after)
}

// removeLocked forgets s everywhere.
func (r *registry) removeLocked(s *Subscription) {
	r.unindexTopicsLocked(s, s.topics)
	if set := r.bySession[s.session]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(r.bySession, s.session)
		}
	}
	delete(r.all, s)
}

func (r *registry) indexLocked(s *Subscription, topics []string, after uint64) {
	for _, t := range topics {
		set := r.byTopic[t]
		if set == nil {
			set = make(map[*Subscription]uint64)
			r.byTopic[t] = set
		}
		set[s] = after
	}
}

func (r *registry) unindexTopicsLocked(s *Subscription, topics []string) {
	for _, t := range topics {
		if set := r.byTopic[t]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(r.byTopic, t)
			}
		}
	}
}

func uniq(topics []string) []string {
	out := slices.Clone(topics)
	slices.Sort(out)
	return slices.Compact(out)
}
