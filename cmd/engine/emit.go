package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
)

type emitCmd struct {
	clientFlags
	Session  string   `arg:"" help:"Session id ([A-Za-z0-9_-], at most 128)."`
	Change   string   `arg:"" help:"enable | disable-all | follow | web-search on|off|unset | preset NAME|unset | disable TOOL | enable-tool TOOL | pick TOOL,... | unpick | a command as JSON, e.g. '{\"type\":\"ToolDisabled\",\"name\":\"bash\"}'."`
	Args     []string `arg:"" optional:"" help:"Argument of the change."`
	Expected *uint64  `name:"expected" help:"Only append if the session's last sequence is this (optimistic concurrency); default: the engine retries safe changes."`
}

func boolPtr(b bool) *bool { return &b }

// commandOf is p as the client's command object (events.EncodeCommand's).
func commandOf(p events.Payload) (client.Command, error) {
	b, err := events.EncodeCommand(p)
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
		return events.DecodeCommand([]byte(change))
	}
	return nil, fmt.Errorf("change %q unknown: use enable, disable-all, follow, web-search, preset, disable, enable-tool, pick, unpick or a JSON command", change)
}

func (c *emitCmd) Run(ctx context.Context) error {
	cmd, err := parseChange(c.Change, c.Args)
	if err != nil {
		return usage(err) // exit 2
	}
	emit := func(cl *client.Client, ctx context.Context, req client.AppendRequest) (client.AppendReply, error) {
		wc, err := commandOf(cmd)
		if err != nil {
			return client.AppendReply{}, err
		}
		req.Commands = []client.Command{wc}
		return cl.Append(ctx, req)
	}
	return show(ctx, c.clientFlags, emit, client.AppendRequest{Session: c.Session, ExpectedSeq: c.Expected}, func(w io.Writer, res client.AppendReply) {
		if res.LastSeq == 0 {
			fmt.Fprintf(w, "no change\t(the session already has this intent)\n")
		} else {
			fmt.Fprintf(w, "appended\tseq %d..%d%s\n", res.FirstSeq, res.LastSeq, map[bool]string{true: " (duplicate)"}[res.Duplicate])
		}
		intentRows(w, res.State.Intent)
	})
}
