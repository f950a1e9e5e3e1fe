package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/wire"
)

// clientFlags are shared by every subcommand that talks to a running engine.
type clientFlags struct {
	Server  string        `name:"server" default:"http://127.0.0.1:7420" env:"ENGINE_SERVER,ENGINE_HTTP" help:"HTTP address of the engine (engine serve --http; ENGINE_SERVER, else serve's own ENGINE_HTTP); the scheme may be left out."`
	JSON    bool          `name:"json" help:"Print the reply as JSON instead of a table."`
	Channel string        `name:"channel" default:"cli" help:"Channel recorded on events this command writes."`
	Actor   string        `name:"actor" env:"USER" help:"Actor recorded on events this command writes."`
	Timeout time.Duration `name:"timeout" default:"30s" help:"Give up after this long."`
	Token   string        `name:"token" env:"ENGINE_TOKEN" help:"Bearer token for an engine serving with --http-tokens (the channel is then the token's)."`
	clientNATSFlags
}

// client returns the API client: over NATS with --nats, NATS_URL or
// --context, else over HTTP at --server. A NATS connection lives until
// the process exits.
func (f clientFlags) client(ctx context.Context) (*client.Client, error) {
	actor := f.Actor
	if actor == "" {
		actor = "cli"
	}
	opts := []client.Option{client.WithChannel(f.Channel), client.WithActor(actor)}
	if f.clientNATSFlags.wanted() {
		nc, err := f.clientNATSFlags.connect(ctx, "")
		if err != nil {
			return nil, err
		}
		return client.NewNATS(nc, opts...), nil
	}
	if f.Token != "" {
		opts = append(opts, client.WithToken(f.Token), client.WithChannel(""))
	}
	if err := checkHTTPServer(withScheme(f.Server)); err != nil {
		return nil, err
	}
	return client.NewHTTP(withScheme(f.Server), opts...), nil
}

// address is where the client talks to, for error messages.
func (f clientFlags) address() string {
	if f.NATS != "" {
		return f.NATS
	}
	return withScheme(f.Server)
}

func (f clientFlags) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, f.Timeout)
}

// request connects to the engine and sends req with op, a client method
// such as (*client.Client).Intent, both within --timeout.
func request[Q, R any](ctx context.Context, f clientFlags, op func(*client.Client, context.Context, Q) (R, error), req Q) (R, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	cl, err := f.client(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	return op(cl, ctx, req)
}

// show is request followed by print: the reply as indented JSON with
// --json, else as the table rows writes.
func show[Q, R any](ctx context.Context, f clientFlags, op func(*client.Client, context.Context, Q) (R, error), req Q, rows func(io.Writer, R)) error {
	r, err := request(ctx, f, op, req)
	if err != nil {
		return err
	}
	return f.print(r, func(w io.Writer) { rows(w, r) })
}

// print writes v as indented JSON when --json, else calls table.
func (f clientFlags) print(v any, table func(w io.Writer)) error {
	if f.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "-"
	}
	return strings.Join(xs, ", ")
}

// valueWidth is the widest value of a key/value table row: with a key
// column of at most 24 columns, tables fit 120 columns.
const valueWidth = 94

// wrapList is lead followed by xs as list does, broken into lines of at
// most valueWidth columns after a comma; a continuation line starts with a
// tab, so tabwriter puts it under the value column of a key\tvalue row.
func wrapList(lead string, xs []string) string {
	if len(xs) == 0 {
		return lead + "-"
	}
	var b strings.Builder
	b.WriteString(lead)
	n := len(lead)
	for i, x := range xs {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if i > 0 && n+len(sep)+len(x) > valueWidth {
			b.WriteString(",\n\t")
			n, sep = 0, ""
		}
		b.WriteString(sep)
		b.WriteString(x)
		n += len(sep) + len(x)
	}
	return b.String()
}

// cut shortens s to at most n runes for a table cell ("..." at the end).
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// toolChange is a history row's tool-set change for a 36-column cell:
// +gained -lost, cut with how many more (--json has them all).
func toolChange(gained, lost []string) string {
	var parts []string
	for _, g := range gained {
		parts = append(parts, "+"+g)
	}
	for _, l := range lost {
		parts = append(parts, "−"+l)
	}
	if len(parts) == 0 {
		return "-"
	}
	out := ""
	for i, p := range parts {
		more := ""
		if i+1 < len(parts) {
			more = fmt.Sprintf(" (+%d more)", len(parts)-i-1)
		}
		next := strings.TrimSpace(out + " " + p)
		if len([]rune(next+more)) > 36 && out != "" {
			return out + fmt.Sprintf(" (+%d more)", len(parts)-i)
		}
		out = next
	}
	return out
}

// wrapText breaks s into lines of at most width runes, at a space or
// after a comma when it can, joining them with sep.
func wrapText(s string, width int, sep string) string {
	var lines []string
	for r := []rune(s); len(r) > 0; {
		if len(r) <= width {
			lines = append(lines, string(r))
			break
		}
		at := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' || r[i-1] == ',' {
				at = i
				break
			}
		}
		lines = append(lines, strings.TrimRight(string(r[:at]), " "))
		r = []rune(strings.TrimLeft(string(r[at:]), " "))
	}
	return strings.Join(lines, sep)
}

// paramNames lists the properties of a JSON Schema object, sorted.
func paramNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func tri(b *bool, unset string) string {
	if b == nil {
		return unset
	}
	return strconv.FormatBool(*b)
}

func intentRows(w io.Writer, in wire.Intent) {
	fmt.Fprintf(w, "enabled\t%s\n", tri(in.Enabled, "unset (follow profile)"))
	fmt.Fprintf(w, "web_search\t%s\n", tri(in.WebSearch, "unset"))
	preset := in.Preset
	if preset == "" {
		preset = "unset"
	}
	fmt.Fprintf(w, "preset\t%s\n", preset)
	fmt.Fprintf(w, "disabled\t%s\n", wrapList("", in.Disabled))
	if in.Picked == nil {
		fmt.Fprintf(w, "picked\tunset\n")
	} else {
		fmt.Fprintf(w, "picked\t%s\n", wrapList("", in.Picked))
	}
}

type intentCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id."`
	MinSeq  uint64 `name:"min-seq" help:"Read-your-writes: wait for the view to include this sequence."`
}

func (c *intentCmd) Run(ctx context.Context) error {
	return show(ctx, c.clientFlags, (*client.Client).Intent, client.IntentRequest{Session: c.Session, MinSeq: c.MinSeq}, intentViewRows)
}

// intentViewRows is the table of engine intent.
func intentViewRows(w io.Writer, v client.Session) {
	fmt.Fprintf(w, "session\t%s (seq %d, %d events, %d skipped, %d rejected)\n", v.Session, v.Seq, v.Events, v.Skipped, v.Rejected)
	for _, r := range v.Rejections {
		fmt.Fprintf(w, "not applied\tseq %d %s %s: %s\n", r.Seq, r.Type, r.ID, r.Reason)
	}
	intentRows(w, v.Intent)
	fmt.Fprintf(w, "loaded\t%s\n", wrapList("", v.Loaded))
	fmt.Fprintf(w, "turn\t%d%s\n", v.Turn, map[bool]string{true: " (open)"}[v.InTurn])
	if cp := v.Checkpoint; cp != nil {
		fmt.Fprintf(w, "checkpoint\tturn %d, seq %d, loaded %s, contract %s (registry %s)\n", cp.Turn, cp.Seq, list(cp.Loaded), short(cp.ContractHash), cp.RegistryVersion)
	} else {
		fmt.Fprintf(w, "checkpoint\tnone\n")
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

type sessionsCmd struct {
	clientFlags
}

func (c *sessionsCmd) Run(ctx context.Context) error {
	sessions := func(cl *client.Client, ctx context.Context, _ struct{}) ([]string, error) {
		l, err := cl.Sessions(ctx)
		return l.Sessions, err
	}
	return show(ctx, c.clientFlags, sessions, struct{}{}, func(w io.Writer, s []string) {
		for _, id := range s {
			fmt.Fprintln(w, id)
		}
	})
}
