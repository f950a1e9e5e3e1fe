package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/wire"
)

// providerFlag is --provider of the client subcommands that render a
// provider's tools.
type providerFlag struct {
	Provider string `name:"provider" default:"anthropic" enum:"anthropic,openai,anthropic-native,anthropic-native-server,openai-native,anthropic-engine,openai-engine" help:"Rendering: ${enum}. anthropic and openai (= their -native forms) use the provider's own deferral (defer_loading); the -engine ones render the engine's catalog for providers without it."`
}

type resolveCmd struct {
	clientFlags
	overrideFlag
	Session string `arg:"" help:"Session id."`
	Profile string `name:"profile" help:"Agent profile of the request."`
	providerFlag
	Render bool `name:"render" help:"Print the rendered provider tools array (JSON) only."`
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
	v, err := request(ctx, c.clientFlags, warned((*client.Client).Resolve, c.Profile, o), client.ResolveRequest{Session: c.Session, Profile: c.Profile, Provider: c.Provider, Override: o})
	if err != nil {
		return err
	}
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
	End      turnEndCmd      `cmd:"" help:"End the open turn at a safe point (one TurnEnded carrying the checkpoint)."`
	// CallCheck is "turn call-check" (kong's default name for the field).
	CallCheck turnCallCheckCmd `cmd:"" help:"Before executing a tool call: may TOOL run now in the open turn, for this channel? Prints the decision and the rule; exits 0 also when refused (see callable)."`
}

type turnCallCheckCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id (its turn must be open)."`
	Tool    string `arg:"" help:"Name of the tool the model called."`
}

func (c *turnCallCheckCmd) Run(ctx context.Context) error {
	return show(ctx, c.clientFlags, (*client.Client).TurnCallCheck, client.CallCheckRequest{Session: c.Session, Tool: c.Tool}, callCheckRows)
}

// callCheckRows is the table of engine turn call-check.
func callCheckRows(w io.Writer, r client.CallCheckReply) {
	fmt.Fprintf(w, "callable\t%t (%s)\n", r.Callable, r.Reason)
	fmt.Fprintf(w, "tool\t%s (turn %d, seq %d)\n", r.Name, r.Turn, r.Seq)
	if r.Decision != "" {
		fmt.Fprintf(w, "decision\t%s for channel %s (rule %s)\n", r.Decision, r.Channel, r.Rule)
	}
	if r.Grant != nil {
		fmt.Fprintf(w, "granted\t%s by %s at seq %d\n", r.Grant.Scope, r.Grant.By, r.Grant.Seq)
	}
	if r.Permission != "" {
		fmt.Fprintf(w, "permission\t%s\n", r.Permission)
	}
	if r.Deferred {
		fmt.Fprintf(w, "deferred\tloaded %t\n", r.Loaded)
	}
	fmt.Fprintf(w, "note\t%s\n", wrapText(r.Note, valueWidth, "\n\t"))
}

type turnBeginCmd struct {
	clientFlags
	overrideFlag
	Session string `arg:"" help:"Session id."`
	Profile string `name:"profile" help:"Agent profile of the turn."`
	providerFlag
}

func (c *turnBeginCmd) Run(ctx context.Context) error {
	o, err := c.parse()
	if err != nil {
		return err
	}
	return show(ctx, c.clientFlags, warned((*client.Client).TurnBegin, c.Profile, o), client.BeginTurnRequest{Session: c.Session, Profile: c.Profile, Provider: c.Provider, Override: o}, viewRows)
}

type turnSearchCmd struct {
	clientFlags
	Session    string   `arg:"" help:"Session id."`
	Names      []string `arg:"" optional:"" help:"Exact names of tools to load."`
	Query      string   `name:"query" short:"q" help:"Keywords: load the best matching deferred tools (BM25 over names, descriptions, parameters)."`
	Regex      string   `name:"regex" help:"Regular expression (RE2, case-insensitive) over deferred tools' names, descriptions and parameters."`
	MaxResults int      `name:"max-results" help:"At most this many tools from --query and --regex (1-20; default 5)."`
	Input      string   `name:"input" help:"The model's tool_search input object as JSON, sent as is (instead of names and flags)."`
	providerFlag
}

func (c *turnSearchCmd) Run(ctx context.Context) error {
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
	return show(ctx, c.clientFlags, (*client.Client).TurnDiscover, client.DiscoverRequest{Session: c.Session, Provider: c.Provider, Input: input}, discoverRows)
}

// discoverRows is the table of engine turn search.
func discoverRows(w io.Writer, r client.DiscoverReply) {
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
}

type turnDispatchCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id."`
	providerFlag
}

func (c *turnDispatchCmd) Run(ctx context.Context) error {
	return show(ctx, c.clientFlags, (*client.Client).TurnDispatch, client.DispatchRequest{Session: c.Session, Provider: c.Provider}, viewRows)
}

type turnEndCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id."`
}

func (c *turnEndCmd) Run(ctx context.Context) error {
	return show(ctx, c.clientFlags, (*client.Client).TurnEnd, client.TurnRequest{Session: c.Session}, checkpointRows)
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
	return show(ctx, c.clientFlags, (*client.Client).TurnCheckpoint, client.TurnRequest{Session: c.Session}, checkpointRows)
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
	return show(ctx, c.clientFlags, (*client.Client).Resume, client.ResumeRequest{Session: c.Session, Profile: c.Profile, Override: o}, resumeRows)
}

// resumeRows is the table of engine resume.
func resumeRows(w io.Writer, r client.ResumeReply) {
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
}
