package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// historySession appends n events to session (100 per append) and returns
// their sequences in order.
func historySession(t *testing.T, c *Client, session string, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for len(seqs) < n {
		var cmds []events.Payload
		for i := 0; i < wire.MaxCommands && len(seqs)+len(cmds) < n; i++ {
			if (len(seqs)+i)%2 == 0 {
				cmds = append(cmds, events.ToolDisabled{Name: "bash"})
			} else {
				cmds = append(cmds, events.ToolEnabled{Name: "bash"})
			}
		}
		res, err := c.Append(ctxT(t), session, nil, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for s := res.FirstSeq; s <= res.LastSeq; s++ {
			seqs = append(seqs, s)
		}
	}
	return seqs
}

// History is paged. A session of 5,000 events is read page by
// page (after_seq, limit, next_after_seq) over HTTP and NATS: the pages
// cover every event exactly once, in order; a page holds at most the
// default page size (or the limit, or about MaxHistoryPageBytes of JSON);
// a limit over the maximum is refused; Client.History still returns the
// whole timeline.
func TestHistoryPaged(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 5000
	seqs := historySession(t, e.httpClient(), "hp5k", n)

	// A request without paging parameters gets one bounded page.
	status, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/hp5k/history", "")
	var first wire.HistoryOf[*service.Command]
	if status != http.StatusOK || json.Unmarshal(body, &first) != nil {
		t.Fatalf("GET history: %d %.200s", status, body)
	}
	t.Logf("history-page: default page %d entries, %d bytes (the whole timeline is %d events)", len(first.Entries), len(body), n)
	if len(first.Entries) != wire.DefaultHistoryPage || !first.More || first.NextAfterSeq != seqs[wire.DefaultHistoryPage-1] || len(body) > wire.MaxHistoryPageBytes+64<<10 {
		t.Fatalf("default page: %d entries (want %d), more %v, next %d (want %d), %d bytes", len(first.Entries), wire.DefaultHistoryPage, first.More, first.NextAfterSeq, seqs[wire.DefaultHistoryPage-1], len(body))
	}
	if first.State.Seq != first.NextAfterSeq {
		t.Fatalf("state of the first page at seq %d, want the page's last entry %d", first.State.Seq, first.NextAfterSeq)
	}
	// The largest page is bounded in bytes as well as entries.
	status, _, body = rawHTTP(t, "GET", fmt.Sprintf("%s/v1/sessions/hp5k/history?limit=%d", e.httpURL, wire.MaxHistoryPage), "")
	var big wire.HistoryOf[*service.Command]
	if status != http.StatusOK || json.Unmarshal(body, &big) != nil {
		t.Fatalf("GET history limit %d: %d %.200s", wire.MaxHistoryPage, status, body)
	}
	t.Logf("history-page: limit %d: %d entries, %d bytes", wire.MaxHistoryPage, len(big.Entries), len(body))
	if len(big.Entries) > wire.MaxHistoryPage || len(body) > wire.MaxHistoryPageBytes+64<<10 || !big.More {
		t.Fatalf("limit %d page: %d entries, %d bytes, more %v", wire.MaxHistoryPage, len(big.Entries), len(body), big.More)
	}
	status, _, body = rawHTTP(t, "GET", fmt.Sprintf("%s/v1/sessions/hp5k/history?limit=%d", e.httpURL, wire.MaxHistoryPage+1), "")
	if status != http.StatusBadRequest || !strings.Contains(apiError(t, body).Message, "limit") {
		t.Fatalf("limit %d: %d %s, want 400 naming the limit", wire.MaxHistoryPage+1, status, body)
	}

	transports(t, e, func(t *testing.T, c *Client) {
		for _, limit := range []int{0, 333, wire.MaxHistoryPage} {
			var got []uint64
			pages := 0
			err := c.HistoryPages(ctxT(t), wire.HistoryRequest{Session: "hp5k", Limit: limit}, func(p wire.HistoryOf[*service.Command]) error {
				pages++
				max := limit
				if max == 0 {
					max = wire.DefaultHistoryPage
				}
				if len(p.Entries) == 0 || len(p.Entries) > max {
					return fmt.Errorf("page %d has %d entries, want 1 to %d", pages, len(p.Entries), max)
				}
				for _, h := range p.Entries {
					got = append(got, h.Seq)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(seqs) {
				t.Fatalf("limit %d: pages cover %d sequences, want each of the %d events once in order", limit, len(got), len(seqs))
			}
			t.Logf("history-page: limit %d: %d pages", limit, pages)
		}
		whole, err := c.History(ctxT(t), wire.HistoryRequest{Session: "hp5k"})
		if err != nil || len(whole.Entries) != n || whole.More || whole.State.Seq != seqs[n-1] || whole.State.Events != n {
			t.Fatalf("History: %d entries, more %v, state seq %d events %d, %v; want %d, the last seq %d", len(whole.Entries), whole.More, whole.State.Seq, whole.State.Events, err, n, seqs[n-1])
		}
		// Until still bounds the pages: the last page ends at it.
		cut := seqs[250]
		part, err := c.History(ctxT(t), wire.HistoryRequest{Session: "hp5k", Until: wire.UntilSeq(cut)})
		if err != nil || len(part.Entries) != 251 || part.State.Seq != cut {
			t.Fatalf("History until %d: %d entries, state %d, %v; want 251", cut, len(part.Entries), part.State.Seq, err)
		}
	})
}
