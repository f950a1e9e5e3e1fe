package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// clientFlags are shared by every subcommand that talks to a running engine.
type clientFlags struct {
	Server  string        `name:"server" default:"http://127.0.0.1:7420" env:"ENGINE_SERVER" help:"HTTP address of the engine (engine serve --http); the scheme may be left out."`
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

type emitCmd struct {
	clientFlags
	Session  string   `arg:"" help:"Session id ([A-Za-z0-9_-], at most 128)."`
	Change   string   `arg:"" help:"enable | disable-all | follow | web-search on|off|unset | preset NAME|unset | disable TOOL | enable-tool TOOL | pick TOOL,... | unpick | a command as JSON, e.g. '{\"type\":\"ToolDisabled\",\"name\":\"bash\"}'."`
	Args     []string `arg:"" optional:"" help:"Argument of the change."`
	Expected *uint64  `name:"expected" help:"Only append if the session's last sequence is this (optimistic concurrency); default: the engine retries safe changes."`
}

func boolPtr(b bool) *bool { return &b }

// commandOf is p as the client's command object (api.EncodeCommand's).
func commandOf(p events.Payload) (client.Command, error) {
	b, err := api.EncodeCommand(p)
	if err != nil {
		return nil, err
	}
	var c client.Command
	return c, json.Unmarshal(b, &c)
}

// parseChange turns the CLI words into one command.
func parseChange(change string, args []string) (events.Payload, error) {
	arg := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("%q takes one argument, got %d", change, len(args))
		}
		return args[0], nil
	}
	switch change {
	case "enable":
		return events.ToolsToggled{Enabled: boolPtr(true)}, nil
	case "disable-all":
		return events.ToolsToggled{Enabled: boolPtr(false)}, nil
	case "follow":
		return events.ToolsToggled{}, nil
	case "web-search":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		switch a {
		case "on", "true":
			return events.WebSearchSet{Enabled: boolPtr(true)}, nil
		case "off", "false":
			return events.WebSearchSet{Enabled: boolPtr(false)}, nil
		case "unset":
			return events.WebSearchSet{}, nil
		}
		return nil, fmt.Errorf("web-search %q: use on, off or unset", a)
	case "preset":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		if a == "unset" {
			a = ""
		}
		return events.PresetChosen{Preset: a}, nil
	case "disable":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		return events.ToolDisabled{Name: a}, nil
	case "enable-tool":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		return events.ToolEnabled{Name: a}, nil
	case "pick":
		a, err := arg()
		if err != nil {
			return nil, err
		}
		return events.ToolsPicked{Names: strings.Split(a, ",")}, nil
	case "unpick":
		return events.ToolsPicked{}, nil
	}
	if strings.HasPrefix(strings.TrimSpace(change), "{") {
		return api.DecodeCommand([]byte(change))
	}
	return nil, fmt.Errorf("change %q unknown: use enable, disable-all, follow, web-search, preset, disable, enable-tool, pick, unpick or a JSON command", change)
}

func (c *emitCmd) Run(ctx context.Context) error {
	cmd, err := parseChange(c.Change, c.Args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	wc, err := commandOf(cmd)
	if err != nil {
		return err
	}
	res, err := cl.Append(ctx, client.AppendRequest{Session: c.Session, ExpectedSeq: c.Expected, Commands: []client.Command{wc}})
	if err != nil {
		return err
	}
	return c.print(res, func(w io.Writer) {
		if res.LastSeq == 0 {
			fmt.Fprintf(w, "no change\t(the session already has this intent)\n")
		} else {
			fmt.Fprintf(w, "appended\tseq %d..%d%s\n", res.FirstSeq, res.LastSeq, map[bool]string{true: " (duplicate)"}[res.Duplicate])
		}
		intentRows(w, res.State.Intent)
	})
}

type intentCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id."`
	MinSeq  uint64 `name:"min-seq" help:"Read-your-writes: wait for the view to include this sequence."`
}

func (c *intentCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	v, err := cl.Intent(ctx, client.IntentRequest{Session: c.Session, MinSeq: c.MinSeq})
	if err != nil {
		return err
	}
	return c.print(v, func(w io.Writer) {
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
	})
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// overrideHelp documents the --override mini-syntax: the per-turn override
// forms of the HTTP and NATS API (R4, R5).
const overrideHelp = `Per-turn override (wins over the session intent): "empty" (no tools), "names:a,b" (exactly these tools, in this order), "intent:{...}" (an intent expanded live, e.g. intent:{"preset":"research","disabled":["bash"]}), or the API's override object {"kind":...,"intent":...,"allowed":[...],"names":[...]}. Default: none.`

// overrideFlag is the --override flag shared by the client subcommands
// that resolve.
type overrideFlag struct {
	Override string `name:"override" placeholder:"FORM" help:"${override_help}"`
}

// parse reads the flag; nil means no override.
func (f overrideFlag) parse() (*wire.Override, error) {
	return parseOverride(f.Override)
}

// parseOverride reads the --override mini-syntax into the API's override.
// The engine validates it again like any API request.
func parseOverride(s string) (*wire.Override, error) {
	s = strings.TrimSpace(s)
	strict := func(what, text string, v any) error {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("--override %s %q: %v", what, text, err)
		}
		if dec.More() {
			return fmt.Errorf("--override %s %q: trailing data after the JSON object", what, text)
		}
		return nil
	}
	switch {
	case s == "" || s == "none":
		return nil, nil
	case s == "empty":
		return &wire.Override{Kind: "empty"}, nil
	case strings.HasPrefix(s, "names:"):
		var names []string
		for _, n := range strings.Split(strings.TrimPrefix(s, "names:"), ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf(`--override %q names no tool: use "empty" for no tools`, s)
		}
		for _, n := range names {
			if err := events.ValidateToolName(n); err != nil {
				return nil, fmt.Errorf("--override %q: %w", s, err)
			}
		}
		return &wire.Override{Kind: "names", Names: names}, nil
	case strings.HasPrefix(s, "intent:"):
		var in wire.Intent
		if err := strict("intent", strings.TrimPrefix(s, "intent:"), &in); err != nil {
			return nil, err
		}
		return &wire.Override{Kind: "intent", Intent: &in}, nil
	case strings.HasPrefix(s, "{"):
		var o wire.Override
		if err := strict("object", s, &o); err != nil {
			return nil, err
		}
		return &o, nil
	}
	return nil, fmt.Errorf(`--override %q: use "empty", "names:a,b", "intent:{...}" or an override object {"kind":...}`, s)
}

// warnNoEvents says on stderr that the session has no events, so that a
// mistyped session id does not silently resolve the defaults.
func warnNoEvents(v wire.TurnView, profile string, o *wire.Override) {
	if !v.NoEvents {
		return
	}
	what := "the defaults"
	switch {
	case o != nil && o.Kind != "none":
		what = "the per-turn override"
	case profile != "":
		what = fmt.Sprintf("profile %q", profile)
	}
	fmt.Fprintf(os.Stderr, "session %s has no events yet: resolving %s\n", v.Session, what)
}

type resolveCmd struct {
	clientFlags
	overrideFlag
	Session  string `arg:"" help:"Session id."`
	Profile  string `name:"profile" help:"Agent profile of the request."`
	Provider string `name:"provider" default:"anthropic" enum:"anthropic,openai,anthropic-native,anthropic-native-server,openai-native" help:"Rendering: ${enum} (the -native ones use provider-native deferral)."`
	Render   bool   `name:"render" help:"Print the rendered provider tools array (JSON) only."`
}

func viewRows(w io.Writer, v wire.TurnView) {
	fmt.Fprintf(w, "session\t%s (seq %d)%s\n", v.Session, v.Seq, frozen(v))
	fmt.Fprintf(w, "source\t%s\n", v.Source)
	fmt.Fprintf(w, "provider array\t%s\n", wrapList(fmt.Sprintf("%d tools: ", len(v.Provider)), v.Provider))
	fmt.Fprintf(w, "catalog\t%s\n", wrapList(fmt.Sprintf("%d deferred: ", len(v.Catalog)), v.Catalog))
	if len(v.Unknown) > 0 {
		fmt.Fprintf(w, "unknown\t%s\n", wrapList("", v.Unknown))
	}
	fmt.Fprintf(w, "loaded\t%s\n", wrapList("", v.Loaded))
	fmt.Fprintf(w, "budget\t%d resident + %d catalog = %d tokens (estimate)\n", v.Budget.Resident, v.Budget.Catalog, v.Budget.Total)
	fmt.Fprintf(w, "contract\t%s (registry %s)\n", v.ContractHash, v.RegistryVersion)
	fmt.Fprintf(w, "prefix\t%s (%s, %d bytes)\n", v.PrefixHash, v.RenderedFor, len(v.Rendering))
}

func frozen(v wire.TurnView) string {
	if v.Frozen {
		return fmt.Sprintf(", turn %d frozen", v.Turn)
	}
	return ""
}

func (c *resolveCmd) Run(ctx context.Context) error {
	o, err := c.parse()
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	v, err := cl.Resolve(ctx, client.ResolveRequest{Session: c.Session, Profile: c.Profile, Provider: c.Provider, Override: o})
	if err != nil {
		return err
	}
	warnNoEvents(v, c.Profile, o)
	if c.Render {
		_, err := os.Stdout.Write(append(v.Rendering, '\n'))
		return err
	}
	return c.print(v, func(w io.Writer) { viewRows(w, v) })
}

type turnCmd struct {
	Begin    turnBeginCmd    `cmd:"" help:"Begin the next turn: freeze the session's tools (see docs/semantics.md#turns)."`
	Search   turnSearchCmd   `cmd:"" help:"tool_search inside the open turn: load deferred tools into the next request."`
	Dispatch turnDispatchCmd `cmd:"" help:"The provider request of the open turn; records its classification (see docs/semantics.md#turns)."`
	End      turnEndCmd      `cmd:"" help:"End the open turn at a safe point (TurnEnded + checkpoint, atomically)."`
}

type turnBeginCmd struct {
	clientFlags
	overrideFlag
	Session  string `arg:"" help:"Session id."`
	Profile  string `name:"profile" help:"Agent profile of the turn."`
	Provider string `name:"provider" default:"anthropic" enum:"anthropic,openai,anthropic-native,anthropic-native-server,openai-native" help:"Rendering: ${enum} (the -native ones use provider-native deferral)."`
}

func (c *turnBeginCmd) Run(ctx context.Context) error {
	o, err := c.parse()
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	v, err := cl.BeginTurn(ctx, client.BeginTurnRequest{Session: c.Session, Profile: c.Profile, Provider: c.Provider, Override: o})
	if err != nil {
		return err
	}
	warnNoEvents(v, c.Profile, o)
	return c.print(v, func(w io.Writer) { viewRows(w, v) })
}

type turnSearchCmd struct {
	clientFlags
	Session    string   `arg:"" help:"Session id."`
	Names      []string `arg:"" optional:"" help:"Exact names of tools to load."`
	Query      string   `name:"query" short:"q" help:"Keywords: load the best matching deferred tools (BM25 over names, descriptions, parameters)."`
	Regex      string   `name:"regex" help:"Regular expression (RE2, case-insensitive) over deferred tools' names, descriptions and parameters."`
	MaxResults int      `name:"max-results" help:"At most this many tools from --query and --regex (1-20; default 5)."`
	Input      string   `name:"input" help:"The model's tool_search input object as JSON, sent as is (instead of names and flags)."`
	Provider   string   `name:"provider" default:"anthropic" enum:"anthropic,openai,anthropic-native,anthropic-native-server,openai-native" help:"Rendering: ${enum} (the -native ones use provider-native deferral)."`
}

func (c *turnSearchCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	input := []byte(c.Input)
	if c.Input == "" {
		var err error
		input, err = json.Marshal(deferral.SearchRequest{Names: c.Names, Query: c.Query, Regex: c.Regex, MaxResults: c.MaxResults})
		if err != nil {
			return err
		}
	} else if len(c.Names)+len(c.Query)+len(c.Regex)+c.MaxResults > 0 {
		return errors.New("give --input alone, or names and flags without --input")
	}
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	r, err := cl.Discover(ctx, client.DiscoverRequest{Session: c.Session, Provider: c.Provider, Input: input})
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "loaded\t%s\n", wrapList("", r.Loaded))
		for _, m := range r.Matches {
			weak := ""
			if m.Weak {
				weak = " (weak: not loaded; load it by name)"
			}
			fmt.Fprintf(w, "match %s\t%s %.3f%s\n", m.Name, m.Via, m.Score, weak)
		}
		if len(r.NotFound) > 0 {
			fmt.Fprintf(w, "not found\t%s\n", wrapList("", r.NotFound))
		}
		if r.Note != "" {
			fmt.Fprintf(w, "note\t%s\n", wrapText(r.Note, valueWidth, "\n\t"))
		}
		for _, t := range r.Tools {
			fmt.Fprintf(w, "schema %s\t%s\n", t.Name, wrapList("parameters: ", paramNames(t.Parameters)))
		}
		if len(r.Tools) > 0 {
			fmt.Fprintf(w, "\t(--json prints the full schemas)\n")
		}
		viewRows(w, r.View)
	})
}

type turnDispatchCmd struct {
	clientFlags
	Session  string `arg:"" help:"Session id."`
	Provider string `name:"provider" default:"anthropic" enum:"anthropic,openai,anthropic-native,anthropic-native-server,openai-native" help:"Rendering: ${enum} (the -native ones use provider-native deferral)."`
}

func (c *turnDispatchCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	v, err := cl.Dispatch(ctx, client.DispatchRequest{Session: c.Session, Provider: c.Provider})
	if err != nil {
		return err
	}
	return c.print(v, func(w io.Writer) { viewRows(w, v) })
}

type turnEndCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id."`
}

func (c *turnEndCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	r, err := cl.EndTurn(ctx, client.TurnRequest{Session: c.Session})
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) { checkpointRows(w, r) })
}

func checkpointRows(w io.Writer, r wire.CheckpointReply) {
	fmt.Fprintf(w, "checkpoint\tseq %d, turn %d\n", r.Seq, r.Checkpoint.Turn)
	fmt.Fprintf(w, "loaded_deferred_tools\t%s\n", wrapList("", r.Checkpoint.Loaded))
	fmt.Fprintf(w, "contract\t%s (registry %s)\n", r.Checkpoint.ContractHash, r.Checkpoint.RegistryVersion)
}

type checkpointCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id (its turn must be open)."`
}

func (c *checkpointCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	r, err := cl.Checkpoint(ctx, client.TurnRequest{Session: c.Session})
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) { checkpointRows(w, r) })
}

type resumeCmd struct {
	clientFlags
	overrideFlag
	Session string `arg:"" help:"Session id."`
	Profile string `name:"profile" help:"Agent profile the session runs with."`
}

func (c *resumeCmd) Run(ctx context.Context) error {
	o, err := c.parse()
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	r, err := cl.Resume(ctx, client.ResumeRequest{Session: c.Session, Profile: c.Profile, Override: o})
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
		switch {
		case r.Outcome.OK:
			fmt.Fprintf(w, "resumed\t%s\n", wrapList("restored ", r.Outcome.Restored))
		case len(r.Outcome.Restored) > 0:
			fmt.Fprintf(w, "partly resumed\t%s\n", wrapList("restored ", r.Outcome.Restored))
		default:
			fmt.Fprintf(w, "refused\trestored nothing\n")
		}
		if r.Outcome.Reason != "" {
			fmt.Fprintf(w, "reason\t%s\n", r.Outcome.Reason)
		}
		for _, ch := range r.Outcome.Changes {
			fmt.Fprintf(w, "change\t%s %s\n", ch.Kind, ch.Tool)
		}
		for _, d := range r.Outcome.Tools {
			fmt.Fprintf(w, "tool %s\t%s: %s\n", d.Tool, d.Kind, d.Reason)
		}
	})
}

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

// Run prints the timeline page by page as the engine sends it (#24 row
// 7): memory is one page, whatever the session's length; each request
// gets --timeout. With --json each page is one JSON object (a session of
// one page prints exactly one).
func (c *historyCmd) Run(ctx context.Context) error {
	until, err := parseUntil(c.Until)
	if err != nil {
		return err
	}
	o, err := c.parse()
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
		var page api.HistoryResponse
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

func (t *historyTable) write(w io.Writer, h api.HistoryResponse) {
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
func (t *historyTable) end(w io.Writer, h api.HistoryResponse, onePage bool) {
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
func summary(c *api.Command) string {
	if cp, ok := c.Payload.(events.CheckpointRecorded); ok {
		return fmt.Sprintf("CheckpointRecorded turn %d loaded [%s] contract %s (%d tools, registry %s)",
			cp.Turn, strings.Join(cp.Loaded, ","), short(cp.ContractHash), len(cp.Contract), cp.RegistryVersion)
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
	until, err := parseUntil(c.Until)
	if err != nil {
		return err
	}
	o, err := c.parse()
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	r, err := cl.Explain(ctx, client.ExplainRequest{Session: c.Session, Tool: c.Tool, Until: until, Profile: c.Profile, Override: o})
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
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

type sessionsCmd struct {
	clientFlags
}

func (c *sessionsCmd) Run(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	list, err := cl.Sessions(ctx)
	if err != nil {
		return err
	}
	s := list.Sessions
	return c.print(s, func(w io.Writer) {
		for _, id := range s {
			fmt.Fprintln(w, id)
		}
	})
}
