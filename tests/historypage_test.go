package tests

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// `engine history` pages through a long session by itself: a
// session of 5,000 events (50 pages of the default 100) prints one row
// per event, each once, in order, with --json one object per page
// covering every event; --page prints one page and where to go on.
func TestCLIHistoryPagesThrough(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := p.Client("cli")
	const n = 5000
	var seqs []uint64
	for len(seqs) < n {
		var cmds []events.Payload
		for i := 0; i < wire.MaxCommands; i++ {
			if (len(seqs)+i)%2 == 0 {
				cmds = append(cmds, events.ToolDisabled{Name: "bash"})
			} else {
				cmds = append(cmds, events.ToolEnabled{Name: "bash"})
			}
		}
		res, err := c.Append(ctx, "long", nil, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for s := res.FirstSeq; s <= res.LastSeq; s++ {
			seqs = append(seqs, s)
		}
	}
	rss := func() string {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				return strings.Join(strings.Fields(l)[1:], " ")
			}
		}
		return "?"
	}
	before := rss()
	start := time.Now()
	out, err := p.runCLI(t, "history", "long", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cli-history: %d events printed in %s, %d bytes; engine RSS %s before, %s after", n, time.Since(start).Round(time.Millisecond), len(out), before, rss())
	var got []uint64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if s, err := strconv.ParseUint(f[0], 10, 64); err == nil && len(f) >= 4 {
			got = append(got, s)
		}
	}
	if len(got) != n || !slices.Equal(got, seqs) {
		t.Fatalf("engine history printed %d event rows, want each of the %d events once in order", len(got), n)
	}
	if strings.Count(out, "SEQ  ") != 1 || !strings.Contains(out, "intent at the end") {
		t.Fatalf("engine history: want one header and the closing intent:\n%.400s\n...\n%s", out, out[max(0, len(out)-400):])
	}

	// --json: one object per page.
	out, err = p.runCLI(t, "history", "long", "--json", "--limit", "700")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	got, pages := nil, 0
	for {
		var h wire.HistoryOf[*service.Command]
		if err := dec.Decode(&h); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("--json page %d: %v", pages+1, err)
		}
		pages++
		if len(h.Entries) > 700 {
			t.Fatalf("--json page %d has %d entries, limit 700", pages, len(h.Entries))
		}
		for _, e := range h.Entries {
			got = append(got, e.Seq)
		}
	}
	if pages < n/700 || !slices.Equal(got, seqs) {
		t.Fatalf("--json: %d pages with %d entries, want each of the %d events once in order", pages, len(got), n)
	}

	// --page: one page, and where the next starts.
	out, err = p.runCLI(t, "history", "long", "--page", "--after", strconv.FormatUint(seqs[99], 10), "--limit", "10")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			if _, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				rows++
			}
		}
	}
	if next := strconv.FormatUint(seqs[109], 10); rows != 10 || !strings.Contains(out, "--page --after "+next) {
		t.Fatalf("--page --after %d --limit 10: %d rows, want 10 and the next page after %s:\n%s", seqs[99], rows, next, out)
	}
}
