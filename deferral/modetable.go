package deferral

import (
	"fmt"
	"strings"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// ModeRow is one way of reaching the provider, measured over the same
// session: the default session's turn, then discoveries.
type ModeRow struct {
	// Mode names the rendering: "no deferral", "engine", "anthropic-native"
	// or "openai-native".
	Mode string `json:"mode"`
	// Start is the context cost at the start of the turn: the tool
	// definitions the model sees plus the catalog.
	Start Tokens `json:"start"`
	// After is the context cost after the discoveries, the loaded tools'
	// definitions included (appended to the array, or inserted by the
	// provider into the messages).
	After Tokens `json:"after"`
	// Broken and Extended count the discoveries that broke the cached
	// prefix of the tools array, or only appended to it.
	Broken   int `json:"prefix_broken"`
	Extended int `json:"prefix_extended"`
	// CatalogChanges counts the discoveries that changed the catalog text.
	CatalogChanges int `json:"catalog_changes"`
	// Bytes is the size of the tools array sent at the start.
	Bytes int `json:"bytes"`
}

// ModeTable compares, for the default session of reg, the context cost and
// the prompt-cache effect of each way deferred tools can reach the
// provider. Loaded names the tools the discoveries load, one
// per discovery, in order; nil takes the first, middle and last name of
// the default session's catalog. Real counts are the measuring stick's on
// the parts of each payload that enter the model's context: for the
// native modes the tools without defer_loading, the catalog (Anthropic)
// or the names and descriptions of deferred functions and namespaces
// (OpenAI, whose own rendering is server-side), and the loaded tools'
// definitions.
func ModeTable(reg *resolver.Registry, loaded []string) ([]ModeRow, []string, error) {
	if reg == nil {
		return nil, nil, fmt.Errorf("build mode table: %w", ErrNilRegistry)
	}
	enabled := true
	res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: &enabled}})
	if err != nil {
		return nil, nil, fmt.Errorf("resolve default session: %w", err)
	}
	if loaded == nil {
		cat := SplitResolution(res, nil).Catalog
		if n := len(cat); n > 0 {
			loaded = []string{cat[0], cat[n/2], cat[n-1]}
			loaded = uniqueNames(loaded)
		}
	}
	var rows []ModeRow

	// No deferral: every tool resident.
	all := make([]resolver.Tool, len(res.Tools))
	copy(all, res.Tools)
	for i := range all {
		all[i].Deferred = false
	}
	none := SplitTools(all, nil)
	row := ModeRow{Mode: "no deferral"}
	rendered := resolver.RenderAnthropic(none.Provider)
	row.Bytes = len(rendered)
	row.Start.Estimate = Estimate(none).Resident
	if row.Start.Real, err = countTools(none.Provider); err != nil {
		return nil, nil, err
	}
	row.After = row.Start
	rows = append(rows, row)

	// The engine's catalog, through a frozen turn.
	turn := FreezeIndexed(1, res, nil, IndexFor(reg))
	row = ModeRow{Mode: string(ModeEngine)}
	s := turn.Request()
	first := resolver.RenderAnthropic(s.Provider)
	row.Bytes = len(first)
	if row.Start, err = engineTokens(s); err != nil {
		return nil, nil, err
	}
	prefix, catalog := PrefixOf(first), s.CatalogText
	for _, name := range loaded {
		turn.Load(name)
		s = turn.Request()
		next := resolver.RenderAnthropic(s.Provider)
		switch prefix.Compare(next) {
		case PrefixBroken:
			row.Broken++
		case PrefixExtended:
			row.Extended++
		}
		if s.CatalogText != catalog {
			row.CatalogChanges++
		}
		prefix, catalog = PrefixOf(next), s.CatalogText
	}
	if row.After, err = engineTokens(s); err != nil {
		return nil, nil, err
	}
	rows = append(rows, row)

	// Native modes: the array and the catalog are the turn's, whatever is
	// loaded; the loaded tools' definitions join the context.
	var loadedTools []resolver.Tool
	for _, name := range loaded {
		if t, ok := turn.Lookup(name); ok {
			loadedTools = append(loadedTools, t)
		}
	}
	for _, p := range nativeModes() {
		mode := p.Mode
		row = ModeRow{Mode: string(mode)}
		arr := p.Render(res.Tools, res.Namespaces, 0)
		row.Bytes = len(arr)
		text, b := p.Context(res)
		row.Start.Estimate = b.Total
		if row.Start.Real, err = nativeReal(mode, res, text); err != nil {
			return nil, nil, err
		}
		extra, extraReal := 0, 0
		for _, t := range loadedTools {
			extra += EstimateTool(t)
		}
		if len(loadedTools) > 0 {
			if extraReal, err = countTools(loadedTools); err != nil {
				return nil, nil, err
			}
		}
		row.After = Tokens{Estimate: row.Start.Estimate + extra, Real: row.Start.Real + extraReal}
		rows = append(rows, row) // the array and catalog never change: no prefix or catalog changes
	}
	return rows, loaded, nil
}

func uniqueNames(names []string) []string {
	var out []string
	for _, n := range names {
		if !containsString(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// engineTokens measures a split sent with the engine's catalog.
func engineTokens(s Split) (Tokens, error) {
	est := Estimate(s)
	real, err := countTools(s.Provider)
	if err != nil {
		return Tokens{}, err
	}
	c, err := Count(s.CatalogText)
	if err != nil {
		return Tokens{}, fmt.Errorf("measure catalog: %w", err)
	}
	return Tokens{Estimate: est.Total, Real: real + c}, nil
}

// nativeReal measures what a native rendering puts into the context at the
// start of a turn.
func nativeReal(mode Mode, res *resolver.Resolution, catalog string) (int, error) {
	var visible []resolver.Tool
	for _, t := range res.Tools {
		if !t.Deferred {
			visible = append(visible, t)
		}
	}
	n, err := countTools(visible)
	if err != nil {
		return 0, err
	}
	var meta strings.Builder
	if mode == ModeOpenAINative {
		for _, e := range nativeEntries(res) {
			fmt.Fprintf(&meta, "{\"name\":%q,\"description\":%q}\n", e.name, e.description)
		}
	} else {
		meta.WriteString(catalog)
	}
	m, err := Count(meta.String())
	if err != nil {
		return 0, fmt.Errorf("measure native metadata: %w", err)
	}
	return n + m, nil
}

// ModeTableString renders the mode rows as aligned text.
func ModeTableString(rows []ModeRow, loaded []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "per mode, the same session: context tokens (estimate/real) at the turn's start and after %d discoveries (%s)\n", len(loaded), strings.Join(loaded, ", "))
	fmt.Fprintf(&b, "%-18s %-17s %-17s %12s %14s %10s\n", "mode", "start", "after", "bytes sent", "array prefix", "catalog")
	for _, r := range rows {
		prefix, cat := "-", "-"
		if r.Mode != "no deferral" {
			prefix = fmt.Sprintf("%d broken", r.Broken)
			if r.Extended > 0 {
				prefix = fmt.Sprintf("%d extended", r.Extended)
			}
			cat = fmt.Sprintf("%d changed", r.CatalogChanges)
		}
		fmt.Fprintf(&b, "%-18s %8d/%-8d %8d/%-8d %12d %14s %10s\n", r.Mode, r.Start.Estimate, r.Start.Real, r.After.Estimate, r.After.Real, r.Bytes, prefix, cat)
	}
	return b.String()
}
