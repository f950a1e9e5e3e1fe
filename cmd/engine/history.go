package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

type historyCmd struct {
	clientFlags
	overrideFlag
	Session string `arg:"" help:"Session id."`
	Until   string `name:"until" placeholder:"SEQ|TIME" help:"Stop at this stream sequence or RFC 3339 time (time travel)."`
	Profile string `name:"profile" help:"Agent profile to resolve with."`
	After   uint64 `name:"after" placeholder:"SEQ" help:"Start after this stream sequence (the next_after_seq a page names)."`
	Limit   int    `name:"limit" help:"Entries per request (at most 1000; default 1000, or the engine's 100 with --page)."`
	Page    bool   `name:"page" help:"Print one page (from --after) and the sequence to go on from, instead of the whole timeline."`
}

func parseUntil(s string) (wire.Until, error) {
	if s == "" {
		return "", nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return "", fmt.Errorf("--until 0: sequences start at 1")
		}
		return wire.UntilSeq(n), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", fmt.Errorf("--until %q: want a sequence number or an RFC 3339 time such as 2026-12-02T10:00:00Z", s)
	}
	return wire.UntilTime(t), nil
}

// parseAt reads --until (as parseUntil) and the override of the commands
// that look at a session at a point in time.
func (f overrideFlag) parseAt(until string) (wire.Until, *wire.Override, error) {
	u, err := parseUntil(until)
	if err != nil {
		return "", nil, err
	}
	o, err := f.parse()
	return u, o, err
}

// Run prints the timeline page by page as the engine sends it: memory
// is one page, whatever the session's length; each request
// gets --timeout. With --json each page is one JSON object (a session of
// one page prints exactly one).
func (c *historyCmd) Run(ctx context.Context) error {
	until, o, err := c.parseAt(c.Until)
	if err != nil {
		return err
	}
	cctx, cancel := c.ctx(ctx)
	cl, err := c.client(cctx)
	cancel()
	if err != nil {
		return err
	}
	limit := c.Limit
	if limit == 0 && !c.Page {
		limit = wire.MaxHistoryPage // fewer round trips; a page still ends at MaxHistoryPageBytes
	}
	req := client.HistoryRequest{Session: c.Session, Until: until, Profile: c.Profile, Override: o, AfterSeq: c.After, Limit: limit}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var tbl historyTable
	for {
		pctx, cancel := c.ctx(ctx)
		// The engine's own command type, so that commands print as the
		// engine wrote them (a client.Command map would sort their keys).
		var page wire.HistoryOf[*service.Command]
		err := cl.Do(pctx, wire.OpHistory, &req, &page)
		cancel()
		if err != nil {
			return err
		}
		if c.JSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(page); err != nil {
				return err
			}
		} else {
			tbl.write(out, page)
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if !page.More || c.Page {
			if !c.JSON {
				tbl.end(out, page, c.Page)
			}
			return nil
		}
		if page.NextAfterSeq <= req.AfterSeq {
			return fmt.Errorf("history of %q: the page after sequence %d says more but names no later sequence (%d)", c.Session, req.AfterSeq, page.NextAfterSeq)
		}
		req.AfterSeq = page.NextAfterSeq
	}
}

// historyTable prints history pages as one table: one row per event
// (who, when, the tool-set change, the prompt-cache prefix), the event
// itself on the lines below it, in 120 columns. Columns are aligned by
// hand (the event lines under each row would split tabwriter's column
// blocks), page by page: a column only widens.
type historyTable struct {
	widths     []int
	prevPicked []string
	rows       int
}

func (t *historyTable) write(w io.Writer, h wire.HistoryOf[*service.Command]) {
	header := []string{"SEQ", "TIME", "CHANNEL/ACTOR", "TOOLS", "PREFIX"}
	var rows [][]string
	var evs []string
	for _, e := range h.Entries {
		ev := e.Type
		if e.Error != "" {
			ev = "SKIPPED: " + e.Error
		} else if e.Payload != nil {
			ev = summary(e.Payload)
			if _, toggle := e.Payload.Payload.(events.ToolsToggled); toggle && len(t.prevPicked) > 0 && e.Intent.Picked == nil {
				ev += " (clears picked " + strings.Join(t.prevPicked, ",") + ")"
			}
		}
		t.prevPicked = e.Intent.Picked
		prefix := "same"
		if e.PrefixChanged {
			prefix = "changed (" + e.Cause + ")"
		}
		rows = append(rows, []string{strconv.FormatUint(e.Seq, 10), e.Time.UTC().Format(time.RFC3339), cut(e.Channel+"/"+e.Actor, 24), toolChange(e.Gained, e.Lost), prefix})
		evs = append(evs, ev)
	}
	if t.widths == nil {
		t.widths = make([]int, len(header))
		rows = append([][]string{header}, rows...)
		evs = append([]string{""}, evs...)
	}
	for _, r := range rows {
		for i, c := range r {
			t.widths[i] = max(t.widths[i], len([]rune(c)))
		}
	}
	indent := strings.Repeat(" ", t.widths[0]+2)
	for i, r := range rows {
		var line strings.Builder
		for j, c := range r {
			line.WriteString(c)
			if j < len(r)-1 {
				line.WriteString(strings.Repeat(" ", t.widths[j]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
		if r[0] != header[0] {
			fmt.Fprintln(w, indent+wrapText(evs[i], 110, "\n"+indent))
			t.rows++
		}
	}
}

// end closes the table with the intent after the last row printed, and
// with --page the sequence the next page starts after.
func (t *historyTable) end(w io.Writer, h wire.HistoryOf[*service.Command], onePage bool) {
	if t.widths == nil {
		t.write(w, h) // the header of an empty timeline
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	if onePage && h.More {
		fmt.Fprintf(tw, "\nmore after\t%d (engine history %s --page --after %d)\n", h.NextAfterSeq, h.Session, h.NextAfterSeq)
	}
	if onePage && h.More {
		fmt.Fprintf(tw, "\nintent after sequence %d\t\n", h.State.Seq)
	} else {
		fmt.Fprintf(tw, "\nintent at the end\t\n")
	}
	intentRows(tw, wire.Intent(h.State.Intent))
	_ = tw.Flush()
}

// summary is a one-line rendering of a command for tables: the JSON form,
// with a checkpoint's per-tool contract reduced to its size.
func summary(c *service.Command) string {
	if cp, ok := c.Payload.(events.CheckpointRecorded); ok {
		return fmt.Sprintf("CheckpointRecorded turn %d loaded [%s] contract %s (%d tools, registry %s)",
			cp.Turn, strings.Join(cp.Loaded, ","), short(cp.ContractHash), len(cp.Contract), cp.RegistryVersion)
	}
	if te, ok := c.Payload.(events.TurnEnded); ok && te.Checkpoint != nil {
		cp := te.Checkpoint
		return fmt.Sprintf("TurnEnded turn %d, checkpoint turn %d loaded [%s] contract %s (%d tools, registry %s)",
			te.Turn, cp.Turn, strings.Join(cp.Loaded, ","), short(cp.ContractHash), len(cp.Contract), cp.RegistryVersion)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return string(c.Payload.EventType())
	}
	return string(b)
}

type explainCmd struct {
	clientFlags
	overrideFlag
	Session string `arg:"" help:"Session id."`
	Tool    string `arg:"" help:"Tool name."`
	Until   string `name:"until" placeholder:"SEQ|TIME" help:"Explain the set as it was at this sequence or time."`
	Profile string `name:"profile" help:"Agent profile to resolve with."`
}

func (c *explainCmd) Run(ctx context.Context) error {
	until, o, err := c.parseAt(c.Until)
	if err != nil {
		return err
	}
	return show(ctx, c.clientFlags, (*client.Client).Explain, client.ExplainRequest{Session: c.Session, Tool: c.Tool, Until: until, Profile: c.Profile, Override: o}, func(w io.Writer, r client.Explanation) {
		in := "OUT"
		if r.Included {
			in = "IN"
		}
		fmt.Fprintf(w, "%s\t%s (rule %s)\n", r.Tool, in, r.Rule)
		fmt.Fprintf(w, "why\t%s\n", r.Detail)
		if r.Event != nil {
			fmt.Fprintf(w, "event\tseq %d %s %s by %s/%s at %s\n", r.Event.Seq, r.Event.Type, r.Event.ID, r.Event.Channel, r.Event.Actor, r.Event.Time.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "registry\t%s (session seq %d)\n", r.RegistryVersion, r.Seq)
	})
}
