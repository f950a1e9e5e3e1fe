package projection

import (
	"fmt"
	"testing"
)

// A feed that falls a batch or more behind the writers' handoffs
// pulls whole batches instead of the gap before the next handed sequence
// (skip answers next 0 without walking the handed sequences); below that
// it still pulls only the gap and skips the runs. Gap after gap, each
// behind a consumer reset, left a projection 150,000 events behind
// folding 1,600 a second.
func TestSkipPullsWholeBatchesWhenBehind(t *testing.T) {
	const limit = 64
	hand := func(n int) *handed {
		h := &handed{skipping: true, bySession: map[string][]handedEvent{}, bySeq: map[uint64]string{}}
		// Sequence 1 was not handed (another writer's); 2, 3, ... were,
		// one session each.
		for i := range n {
			seq := uint64(i + 2)
			s := fmt.Sprintf("s%d", i)
			h.bySession[s] = []handedEvent{{seq: seq, id: s}}
			h.bySeq[seq] = s
		}
		return h
	}
	h := hand(limit - 1)
	if run, next := h.skip(1, limit); len(run) != 0 || next != 2 {
		t.Fatalf("%d handed behind a gap: run %d, next %d; want the gap pulled alone (next 2)", limit-1, len(run), next)
	}
	if run, _ := h.skip(2, limit); len(run) != limit-1 {
		t.Fatalf("the run after the gap: %d skipped, want %d", len(run), limit-1)
	}
	h = hand(limit)
	if run, next := h.skip(1, limit); len(run) != 0 || next != 0 {
		t.Fatalf("%d handed behind a gap: run %d, next %d; want a whole batch pulled (next 0)", limit, len(run), next)
	}
	// The handed events the whole batch delivers are checked, not folded.
	for seq := uint64(2); seq < limit+2; seq++ {
		s := h.bySeq[seq]
		if !h.held(s, seq, s) {
			t.Fatalf("delivered handed seq %d not held", seq)
		}
	}
	if len(h.bySeq) != 0 {
		t.Fatalf("%d handed sequences left after their delivery", len(h.bySeq))
	}
}

// A run skipped at the pull's cursor leaves the same session's handed
// events below it, which an earlier pull delivered and the feed has not
// read yet: their delivery is still checked against the handoff and
// counted as held, not decoded as another writer's.
func TestSkipKeepsHandedEventsQueuedBelowTheCursor(t *testing.T) {
	h := &handed{skipping: true}
	h.bySession = map[string][]handedEvent{"h06": {{seq: 41, id: "a"}, {seq: 53, id: "b"}}}
	h.bySeq = map[uint64]string{41: "h06", 53: "h06"}
	run, _ := h.skip(53, 64)
	if len(run) != 1 || run[0].Seq != 53 || !run[0].Held {
		t.Fatalf("skip at 53: %+v, want the held run [53]", run)
	}
	if !h.held("h06", 41, "a") {
		t.Fatal("the queued delivery of 41 after the skip at 53 is not held")
	}
	if h.held("h06", 41, "a") || len(h.bySeq) != 0 || len(h.bySession) != 0 {
		t.Fatalf("handed events left after both were taken: %v %v", h.bySeq, h.bySession)
	}
}

// A handed event at or below what the feed has read was folded without
// the check (a feed's start folds from the log) and is forgotten by the
// next skip of its session, not kept for a delivery that never comes.
func TestSkipForgetsHandedEventsTheFeedReadPast(t *testing.T) {
	h := &handed{skipping: true, delivered: 45, read: 45}
	h.bySession = map[string][]handedEvent{"h06": {{seq: 30, id: "a"}, {seq: 50, id: "b"}, {seq: 53, id: "c"}}}
	h.bySeq = map[uint64]string{30: "h06", 50: "h06", 53: "h06"}
	if run, _ := h.skip(53, 64); len(run) != 1 || run[0].Seq != 53 {
		t.Fatalf("skip at 53: %+v, want the run [53]", run)
	}
	if _, ok := h.bySeq[30]; ok {
		t.Fatal("the handed event at 30, below what the feed read (45), is still kept")
	}
	if !h.held("h06", 50, "b") || len(h.bySeq) != 0 {
		t.Fatalf("the queued delivery of 50 is not held, or events are left: %v", h.bySeq)
	}
}

// A skipped run moves what the feed is taken to have delivered, not what
// it has read: a session's handed event below the run, delivered by a
// pull before it and still queued for the feed, is kept by the next skip
// of that session and verified when the feed reads it.
func TestSkipKeepsQueuedHandedEventsBelowAnEarlierRun(t *testing.T) {
	h := &handed{skipping: true}
	h.bySession = map[string][]handedEvent{"h06": {{seq: 41, id: "a"}, {seq: 60, id: "c"}}, "h07": {{seq: 50, id: "b"}}}
	h.bySeq = map[uint64]string{41: "h06", 50: "h07", 60: "h06"}
	if run, _ := h.skip(50, 64); len(run) != 1 || run[0].Seq != 50 {
		t.Fatalf("skip at 50: %+v, want the run [50]", run)
	}
	if run, _ := h.skip(60, 64); len(run) != 1 || run[0].Seq != 60 {
		t.Fatalf("skip at 60: %+v, want the run [60]", run)
	}
	if !h.held("h06", 41, "a") {
		t.Fatal("the queued delivery of 41, below the run skipped at 50, is not held")
	}
}
