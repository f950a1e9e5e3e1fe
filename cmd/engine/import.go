package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/legacy"
	"github.com/toolintent/engine/service"
)

type importCmd struct {
	clientFlags
	File        string `arg:"" type:"existingfile" help:"Legacy session configs (JSON): [{\"session\": \"s1\", \"tools\": [names] | {name: true|false} (opencode's form: changes the defaults, so {\"bash\": false} is every default tool but bash) | true | false | null, \"web_search\": true}, ...], or {\"defaults\": [DEFAULT_TOOLS of that time], \"presets\": {...}, \"sessions\": [...]}."`
	Apply       bool   `name:"apply" help:"Write the events through the engine's API (every guard applies); default: a dry run that prints the plan."`
	Registry    string `name:"registry" type:"existingfile" help:"The registry the engine serves (default: the embedded default); --apply checks its version against the engine's."`
	MaxPicked   int    `name:"max-picked" default:"16" help:"The engine's picked-list bound (see docs/semantics.md#picked-lists)."`
	MaxDisabled int    `name:"max-disabled" default:"64" help:"The engine's disabled-list bound."`
}

// importLine is one session of the import report as printed with --json.
type importLine struct {
	legacy.Decision
	Events []service.Command `json:"events"`
	// Applied says what --apply did: the sequences written, or why not.
	Applied *importApplied `json:"applied,omitempty"`
}

type importApplied struct {
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	Error    string `json:"error,omitempty"`
}

type importReport struct {
	RegistryVersion string       `json:"registry_version"`
	Applied         bool         `json:"applied"`
	Sessions        []importLine `json:"sessions"`
	Notes           []string     `json:"notes,omitempty"`
}

func (c *importCmd) Run(ctx context.Context) error {
	data, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	f, err := legacy.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	reg, err := loadRegistry(c.Registry)
	if err != nil {
		return err
	}
	plan := legacy.Plan(reg, f, legacy.Options{Limits: aggregate.Limits{MaxPicked: c.MaxPicked, MaxDisabled: c.MaxDisabled}})
	rep := importReport{RegistryVersion: plan.RegistryVersion, Applied: c.Apply, Notes: plan.Notes}
	for _, d := range plan.Decisions {
		line := importLine{Decision: d, Events: []service.Command{}}
		for _, p := range d.Events {
			line.Events = append(line.Events, service.Command{Payload: p})
		}
		rep.Sessions = append(rep.Sessions, line)
	}
	failed := 0
	if c.Apply {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		cl, err := c.client(ctx)
		if err != nil {
			return err
		}
		info, err := cl.Registry(ctx)
		if err != nil {
			return err
		}
		if info.Version != plan.RegistryVersion {
			return fmt.Errorf("the plan was made against registry %s, the engine serves %s: pass the served registry file with --registry", plan.RegistryVersion, info.Version)
		}
		for i := range rep.Sessions {
			line := &rep.Sessions[i]
			if line.Kind == legacy.KindSkip {
				failed++
				continue
			}
			if len(line.Decision.Events) == 0 {
				continue // follows its profile: nothing to write
			}
			none := uint64(0) // only sessions without events: never overwrite a live session
			res, err := appendPayloads(ctx, cl, line.Session, &none, line.Decision.Events)
			switch {
			case errors.Is(err, client.ErrConflict):
				line.Applied = &importApplied{Error: "the session already has events in the engine; import writes only to sessions without events"}
				failed++
			case err != nil:
				line.Applied = &importApplied{Error: err.Error()}
				failed++
			default:
				line.Applied = &importApplied{FirstSeq: res.FirstSeq, LastSeq: res.LastSeq}
			}
		}
	}
	if err := c.print(rep, func(w io.Writer) { importRows(w, rep) }); err != nil {
		return err
	}
	if c.Apply && failed > 0 {
		return fmt.Errorf("%d of %d sessions not imported (see the report)", failed, len(rep.Sessions))
	}
	return nil
}

func importRows(w io.Writer, rep importReport) {
	mode := "dry run (pass --apply to write)"
	if rep.Applied {
		mode = "applied"
	}
	fmt.Fprintf(w, "import\t%d sessions against registry %s, %s\n", len(rep.Sessions), rep.RegistryVersion, mode)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note\t%s\n", n)
	}
	kinds := map[string]int{}
	for _, s := range rep.Sessions {
		kinds[s.Kind]++
		fmt.Fprintf(w, "\nsession %s\t%s", s.Session, s.Kind)
		if s.Preset != "" {
			fmt.Fprintf(w, " %s", s.Preset)
		}
		fmt.Fprintf(w, "\n  why\t%s\n", s.Note)
		if len(s.Events) > 0 {
			var ev []string
			for _, e := range s.Events {
				b, _ := json.Marshal(e)
				ev = append(ev, string(b))
			}
			fmt.Fprintf(w, "  events\t%s\n", strings.Join(ev, " "))
		}
		if s.Kind != legacy.KindSkip {
			exact := "yes"
			if !s.Faithful {
				exact = "NO"
			}
			fmt.Fprintf(w, "  reproduces the stored list\t%s (against the lists of the time it was saved)\n", exact)
			fmt.Fprintf(w, "  today\t%d tools; gains %s; loses %s\n", len(s.Today), list(s.Gained), list(s.Lost))
		}
		if len(s.Unknown) > 0 {
			fmt.Fprintf(w, "  unknown names (not imported)\t%s\n", list(s.Unknown))
		}
		if a := s.Applied; a != nil {
			if a.Error != "" {
				fmt.Fprintf(w, "  not written\t%s\n", a.Error)
			} else {
				fmt.Fprintf(w, "  written\tseq %d..%d\n", a.FirstSeq, a.LastSeq)
			}
		}
	}
	var parts []string
	for _, k := range []string{legacy.KindEnabled, legacy.KindPreset, legacy.KindDefaultsMinus, legacy.KindPresetMinus, legacy.KindPicked, legacy.KindOff, legacy.KindOffWebSearch, legacy.KindFollow, legacy.KindSkip} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	fmt.Fprintf(w, "\nsummary\t%s\n", strings.Join(parts, ", "))
}

// appendPayloads appends the engine's commands through the client.
func appendPayloads(ctx context.Context, cl *client.Client, session string, expected *uint64, ps []events.Payload) (client.AppendReply, error) {
	req := client.AppendRequest{Session: session, ExpectedSeq: expected}
	for _, p := range ps {
		c, err := commandOf(p)
		if err != nil {
			return client.AppendReply{}, err
		}
		req.Commands = append(req.Commands, c)
	}
	return cl.Append(ctx, req)
}
