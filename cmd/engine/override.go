package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// overrideHelp documents the --override mini-syntax: the per-turn override
// forms of the HTTP and NATS API.
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
		return &wire.Override{Kind: resolver.OverrideEmpty}, nil
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
		return &wire.Override{Kind: resolver.OverrideNames, Names: names}, nil
	case strings.HasPrefix(s, "intent:"):
		var in wire.Intent
		if err := strict("intent", strings.TrimPrefix(s, "intent:"), &in); err != nil {
			return nil, err
		}
		return &wire.Override{Kind: resolver.OverrideIntent, Intent: in}, nil
	case strings.HasPrefix(s, "{"):
		var o wire.Override
		if err := strict("object", s, &o); err != nil {
			return nil, err
		}
		return &o, nil
	}
	return nil, fmt.Errorf(`--override %q: use "empty", "names:a,b", "intent:{...}" or an override object {"kind":...}`, s)
}

// warned is op followed by warnNoEvents on the view it resolves.
func warned[Q any](op func(*client.Client, context.Context, Q) (wire.TurnView, error), profile string, o *wire.Override) func(*client.Client, context.Context, Q) (wire.TurnView, error) {
	return func(cl *client.Client, ctx context.Context, req Q) (wire.TurnView, error) {
		v, err := op(cl, ctx, req)
		if err == nil {
			warnNoEvents(v, profile, o)
		}
		return v, err
	}
}

// warnNoEvents says on stderr that the session has no events, so that a
// mistyped session id does not silently resolve the defaults.
func warnNoEvents(v wire.TurnView, profile string, o *wire.Override) {
	if !v.NoEvents {
		return
	}
	what := "the defaults"
	switch {
	case o != nil && o.Kind != resolver.OverrideNone:
		what = "the per-turn override"
	case profile != "":
		what = fmt.Sprintf("profile %q", profile)
	}
	fmt.Fprintf(os.Stderr, "session %s has no events yet: resolving %s\n", v.Session, what)
}
