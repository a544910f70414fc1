package room

import "testing"

func TestSessionCache_AnEndedSessionIsNeverCachedAgain(t *testing.T) {
	var c sessionCache
	h := []byte("hash-1")
	s := cachedSession{p: Principal{ParticipantID: "p1", SessionRef: "sref_1"}, expires: 100}
	c.put(h, s)
	if _, ok := c.get(h); !ok {
		t.Fatal("a live session was not cached")
	}
	c.end("sref_1")
	if _, ok := c.get(h); ok {
		t.Fatal("an ended session is still cached")
	}
	// A reader that loaded the row from a snapshot older than the end must
	// not bring it back.
	c.put(h, s)
	if _, ok := c.get(h); ok {
		t.Fatal("a late fill revived an ended session")
	}
	other := []byte("hash-2")
	c.put(other, cachedSession{p: Principal{SessionRef: "sref_2"}, expires: 100})
	if _, ok := c.get(other); !ok {
		t.Fatal("ending one session stopped caching another")
	}
}
