package jetstream

import (
	"testing"
	"time"
)

// The feed reads sequence, pending count and timestamp from the
// acknowledgement subject itself, in both of the server's forms, and
// falls back to the library's parser for anything else.
func TestAckMetaForms(t *testing.T) {
	ts := time.Unix(0, 1733300000123456789)
	for _, c := range []struct {
		reply        string
		seq, pending uint64
		ok           bool
	}{
		{"$JS.ACK.EVENTS.views.1.42.40.1733300000123456789.7", 42, 7, true},
		{"$JS.ACK._.ABCHASH.EVENTS.views.3.42.40.1733300000123456789.7.xyz", 42, 7, true},
		{"$JS.ACK.dom.ABCHASH.EVENTS.views.3.42.40.1733300000123456789.7", 42, 7, true},
		{"$JS.ACK.EVENTS.views.1.42.40.1733300000123456789", 0, 0, false},
		{"$JS.ACK.EVENTS.views.1.x.40.1733300000123456789.7", 0, 0, false},
		{"_INBOX.abc", 0, 0, false},
		{"", 0, 0, false},
	} {
		seq, pending, at, ok := ackMeta(c.reply)
		if ok != c.ok || seq != c.seq || pending != c.pending || (ok && !at.Equal(ts)) {
			t.Errorf("ackMeta(%q) = %d, %d, %v, %v; want %d, %d, %v, %v", c.reply, seq, pending, at, ok, c.seq, c.pending, ts, c.ok)
		}
	}
}
