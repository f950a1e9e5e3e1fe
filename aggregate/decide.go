package aggregate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
)

// Sentinel errors returned by Decide, matched with errors.Is.
var (
	// ErrMaterialized means a command tried to store an expanded tool list
	// instead of an intent: a picked list equal to a whole preset or
	// to the defaults, or longer than Limits.MaxPicked.
	ErrMaterialized = errors.New("expanded tool list refused")
	// ErrInvalidCommand means a command is not valid against the state
	// (wrong turn number, malformed names, too many disabled tools, ...).
	ErrInvalidCommand = errors.New("invalid command")
	// ErrUnknownTool means a command names a tool the registry does not
	// have.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrToolDisabled means a DeferredLoaded names a tool the session has
	// disabled (a search never loads a disabled tool); it
	// matches ErrInvalidCommand too.
	ErrToolDisabled = errors.New("tool disabled in this session")
	// ErrDeleted means the session was deleted (a SessionDeleted is in its
	// log): every command is refused, and the id never starts a new
	// session.
	ErrDeleted = errors.New("session deleted")
)

// Command is an event payload proposed by a caller; Decide turns it into
// the payloads to append.
type Command = events.Payload

// Default limits used when a Limits field is zero.
const (
	DefaultMaxPicked   = 16
	DefaultMaxDisabled = 64
)

// Limits bounds what a session may store. The zero value uses the defaults.
// A limit above the fold's wire bound (events.MaxPicked, events.MaxListLen)
// is lowered to it: Decide never emits an event the fold rejects.
type Limits struct {
	// MaxPicked bounds a picked list; 0 means DefaultMaxPicked.
	MaxPicked int
	// MaxDisabled bounds the disabled list; 0 means DefaultMaxDisabled.
	MaxDisabled int
}

func (l Limits) withDefaults() Limits {
	if l.MaxPicked <= 0 {
		l.MaxPicked = DefaultMaxPicked
	}
	if l.MaxDisabled <= 0 {
		l.MaxDisabled = DefaultMaxDisabled
	}
	l.MaxPicked = min(l.MaxPicked, events.MaxPicked)
	l.MaxDisabled = min(l.MaxDisabled, events.MaxListLen)
	return l
}

// Decide validates cmd against the state s and the live registry reg and
// returns the payloads to append: usually cmd itself in value form, empty
// when the command changes nothing (a no-op), normalised where noted. It is
// pure and deterministic; it never panics. Every payload it returns, applied
// in order, passes the fold's rules (State.Check); on top of them it
// checks what needs the registry.
//
// Rules:
//   - ToolsToggled, WebSearchSet: always valid (WebSearchSet{true} needs a
//     web_search tool in the registry). ToolsToggled is a no-op only when
//     Enabled already has its value and no picked list is set (it clears
//     one).
//   - PresetChosen: the preset must exist (the error names it and lists the
//     presets, and matches resolver.ErrUnknownPreset too); "" unsets.
//   - ToolDisabled: a known tool; at most Limits.MaxDisabled disabled.
//   - ToolEnabled: a valid name; a no-op when it is not disabled.
//   - ToolsPicked: nil unsets. Otherwise 1 to Limits.MaxPicked distinct,
//     known names, and not equal as a set to a whole preset or to the
//     defaults (with or without web_search): that is an expanded list, and
//     ErrMaterialized says which intent to store instead. An empty
//     list is refused; ToolsToggled{enabled:false} means no tools.
//   - DeferredLoaded: inside an open turn; known, deferred tools that the
//     session has not disabled (ErrToolDisabled: a tool disabled in the
//     middle of a turn is not loaded by a later search of it; an API
//     rule, not a fold rule, since logs written before it may hold such
//     loads and must fold as they did); Turn 0
//     means s.Turn, any other value must equal s.Turn; names already
//     loaded are dropped, so loading only loaded tools is a no-op.
//   - DeferredEvicted: between turns, after turn s.Turn (Turn 0 means
//     it); names not loaded are dropped, none loaded is a no-op.
//   - TurnStarted: Turn must be s.Turn+1 (0 means s.Turn+1). If turn
//     s.Turn is still open, a TurnEnded for it is emitted first.
//   - TurnEnded: Turn must be s.Turn (0 means s.Turn); a no-op if that
//     turn is already ended; an error before the first turn. A
//     Checkpoint, if set, is decided as a CheckpointRecorded (below) and
//     emitted inside the TurnEnded (one event, one log write); when
//     the turn has already ended, the checkpoint alone is emitted as a
//     CheckpointRecorded.
//   - PermissionGranted: a tool of the registry (a plain name),
//     scope "session" or "once", a non-empty By; Turn 0 means s.Turn,
//     otherwise it must equal s.Turn; "once" needs the turn open.
//   - CheckpointRecorded: ContractHash is a SHA-256 in lower-case hex and
//     RegistryVersion is not empty; Turn 0 means s.Turn, otherwise at most
//     s.Turn; loaded names belong to Contract (a checkpoint that loads
//     tools records its contract), which lists exactly the loaded
//     tools with their per-tool hashes, or (the older form) the whole
//     contract, whose entries then add up to ContractHash
//     (resolver.ContractHashFromToolHashes); when the
//     checkpoint names the live registry's version, loaded names are
//     deferred tools of it, not resident ones. Loaded is emitted sorted and
//     de-duplicated.
//   - SessionDeleted: closes the session, also in an open turn.
//
// Every command on a deleted session (State.Deleted) is refused with
// ErrDeleted, a SessionDeleted too.
func Decide(s State, reg *resolver.Registry, cmd Command, lim Limits) ([]events.Payload, error) {
	if reg == nil {
		return nil, fmt.Errorf("decide: registry is nil, pass the live registry: %w", ErrInvalidCommand)
	}
	p, ok := events.PayloadValue(cmd)
	if !ok {
		return nil, fmt.Errorf("decide: command %T is not an events payload, use one of %v: %w", cmd, events.Types(), ErrInvalidCommand)
	}
	if s.Deleted() {
		return nil, fmt.Errorf("decide %s: session %q was deleted at sequence %d; a deleted id takes no new events: %w", p.EventType(), s.Session, s.DeletedSeq, ErrDeleted)
	}
	lim = lim.withDefaults()
	if key, on, set, ok := events.Overlay(p); ok {
		return decideOverlay(s, reg, key, on, set)
	}
	switch c := p.(type) {
	case events.SessionDeleted:
		if err := events.CheckStored(events.Envelope{ID: "decide", Payload: c}, "decide"); err != nil {
			return nil, fmt.Errorf("decide SessionDeleted: %w: %w", err, ErrInvalidCommand)
		}
		return one(c), nil
	case events.ToolsToggled:
		if eqBool(s.Intent.Enabled, c.Enabled) && s.Intent.Picked == nil {
			return nil, nil // a no-op only when it would not clear a picked list either
		}
		return one(events.ToolsToggled{Enabled: intent.CloneBool(c.Enabled)}), nil
	case events.PresetChosen:
		if c.Preset != "" {
			if _, ok := reg.Preset(c.Preset); !ok {
				return nil, fmt.Errorf("decide PresetChosen: preset %q is not in registry %s, choose one of %s: %w: %w",
					c.Preset, reg.Version(), listNames(reg.PresetNames()), resolver.ErrUnknownPreset, ErrInvalidCommand)
			}
		}
		if s.Intent.Preset == c.Preset {
			return nil, nil
		}
		return one(c), nil
	case events.ToolDisabled:
		if err := knownTool(reg, "ToolDisabled", c.Name); err != nil {
			return nil, err
		}
		if slices.Contains(s.Intent.Disabled, c.Name) {
			return nil, nil
		}
		if len(s.Intent.Disabled) >= lim.MaxDisabled {
			return nil, fmt.Errorf("decide ToolDisabled: session already disables %d tools, at most %d allowed; choose a preset or pick tools instead: %w", len(s.Intent.Disabled), lim.MaxDisabled, ErrInvalidCommand)
		}
		return one(c), nil
	case events.ToolEnabled:
		if err := events.ValidateToolPattern(c.Name); err != nil {
			return nil, fmt.Errorf("decide ToolEnabled: %w: %w", err, ErrInvalidCommand)
		}
		if !slices.Contains(s.Intent.Disabled, c.Name) {
			return nil, nil
		}
		return one(c), nil
	case events.ToolsPicked:
		return decidePicked(s, reg, c, lim)
	case events.DeferredLoaded:
		return decideLoaded(s, reg, c)
	case events.DeferredEvicted:
		return decideEvicted(s, c)
	case events.TurnStarted:
		return decideTurnStarted(s, c, lim)
	case events.TurnEnded:
		return decideTurnEnded(s, reg, c)
	case events.CheckpointRecorded:
		return decideCheckpoint(s, reg, c)
	case events.PermissionGranted:
		return decideGranted(s, reg, c)
	case events.SessionCompacted:
		return nil, fmt.Errorf("decide SessionCompacted: a snapshot is not a command; compact the session through the engine's compact operation: %w", ErrInvalidCommand)
	}
	return nil, fmt.Errorf("decide: command %T is not supported: %w", p, ErrInvalidCommand)
}

func one(p events.Payload) []events.Payload { return []events.Payload{p} }

// decideOverlay decides a command that sets the overlay switch key of the
// intent to on (events.Overlay; set is the command to store): turning it
// on needs the tool it adds, named key, in the registry, and setting the
// value it has is a no-op.
func decideOverlay(s State, reg *resolver.Registry, key string, on *bool, set events.Payload) ([]events.Payload, error) {
	if on != nil && *on {
		if _, ok := reg.Tool(key); !ok {
			return nil, fmt.Errorf("decide %s: registry %s has no %s tool, add it to the registry first: %w", set.EventType(), reg.Version(), key, ErrUnknownTool)
		}
	}
	for i := range intent.NumFields {
		if k, cur := s.Intent.Field(i); k == key && eqBool(*cur.(**bool), on) {
			return nil, nil
		}
	}
	return one(set), nil
}

func eqBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func knownTool(reg *resolver.Registry, op, name string) error {
	if err := events.ValidateToolPattern(name); err != nil {
		return fmt.Errorf("decide %s: %w: %w", op, err, ErrInvalidCommand)
	}
	if !knownName(reg, name) {
		if resolver.IsPattern(name) {
			return fmt.Errorf("decide %s: pattern %q matches no tool of registry %s, check it: %w", op, name, reg.Version(), ErrUnknownTool)
		}
		return fmt.Errorf("decide %s: tool %q is not in registry %s, check the name: %w", op, name, reg.Version(), ErrUnknownTool)
	}
	return nil
}

// knownName reports whether the registry has the named tool, or a tool
// the pattern matches.
func knownName(reg *resolver.Registry, name string) bool {
	if resolver.IsPattern(name) {
		return len(reg.Matches(name)) > 0
	}
	_, ok := reg.Tool(name)
	return ok
}

func listNames(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

func decidePicked(s State, reg *resolver.Registry, c events.ToolsPicked, lim Limits) ([]events.Payload, error) {
	if c.Names == nil {
		if s.Intent.Picked == nil {
			return nil, nil
		}
		return one(events.ToolsPicked{}), nil
	}
	presets := reg.PresetNames()
	if len(c.Names) > events.MaxListLen {
		return nil, tooLong(len(c.Names), lim.MaxPicked, presets)
	}
	if len(c.Names) == 0 {
		return nil, fmt.Errorf("decide ToolsPicked: picked list is empty; to use no tools store ToolsToggled{enabled:false}, to unset the picked list send ToolsPicked with nil names: %w", ErrInvalidCommand)
	}
	seen := make(map[string]bool, len(c.Names))
	var unknown []string
	for _, n := range c.Names {
		if err := events.ValidateToolPattern(n); err != nil {
			return nil, fmt.Errorf("decide ToolsPicked: %w: %w", err, ErrInvalidCommand)
		}
		if seen[n] {
			return nil, fmt.Errorf("decide ToolsPicked: %q is picked twice, list each tool once: %w", n, ErrInvalidCommand)
		}
		seen[n] = true
		if !knownName(reg, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("decide ToolsPicked: %s not in registry %s, check the names: %w", listNames(unknown), reg.Version(), ErrUnknownTool)
	}
	// A picked list that equals an expansion is that expansion frozen.
	if preset, ok := materializes(reg, seen); ok {
		if preset == "" {
			return nil, fmt.Errorf("decide ToolsPicked: picked list equals the registry defaults (DEFAULT_TOOLS), an expanded tool list, which a session never stores (see docs/semantics.md#picked-lists); store the intent instead: ToolsToggled{enabled:true}%s: %w",
				webSearchHint(seen), ErrMaterialized)
		}
		return nil, fmt.Errorf("decide ToolsPicked: picked list equals the whole preset %q, an expanded tool list, which a session never stores (see docs/semantics.md#picked-lists); store the intent instead: PresetChosen{preset:%q}%s: %w",
			preset, preset, webSearchHint(seen), ErrMaterialized)
	}
	if len(c.Names) > lim.MaxPicked {
		return nil, tooLong(len(c.Names), lim.MaxPicked, presets)
	}
	if slices.Equal(s.Intent.Picked, c.Names) {
		return nil, nil
	}
	return one(events.ToolsPicked{Names: slices.Clone(c.Names)}), nil
}

// materializes reports whether the picked set equals, as a set (with or
// without web_search), the defaults of reg (preset "") or a whole preset
// of reg (its name): the materialization guard, which Decide applies
// against the live registry and every fold against the registry in force
// when the event was stored (State.Check).
func materializes(reg *resolver.Registry, picked map[string]bool) (preset string, ok bool) {
	if sameSetModuloWebSearch(picked, availableOnly(reg, reg.DefaultTools())) {
		return "", true
	}
	for _, name := range reg.PresetNames() {
		list, _ := reg.Preset(name)
		if sameSetModuloWebSearch(picked, list) || sameSetModuloWebSearch(picked, availableOnly(reg, list)) {
			return name, true
		}
	}
	return "", false
}

// deferredIn reports whether reg has the tool name and loads it on demand
// (deferred, not resident): the loaded-tool rule, which Decide applies
// against the live registry and every fold against the registry in force
// when the event was stored. why says what is wrong when it does not.
func deferredIn(reg *resolver.Registry, name string) (why string, ok bool) {
	t, known := reg.Tool(name)
	if !known {
		return fmt.Sprintf("tool %q is not in registry %s", name, reg.Version()), false
	}
	if !t.Deferred || reg.IsResident(name) {
		return fmt.Sprintf("tool %q is resident in registry %s, not deferred, so it is never loaded", name, reg.Version()), false
	}
	return "", true
}

func tooLong(n, max int, presets []string) error {
	return fmt.Errorf("decide ToolsPicked: picked list has %d names, at most %d allowed; a long list is an expanded tool list, which a session never stores (see docs/semantics.md#picked-lists); store the intent instead: ToolsToggled{enabled:true} / PresetChosen{preset:%s}, then ToolDisabled for exceptions: %w",
		n, max, presetChoice(presets), ErrMaterialized)
}

func presetChoice(presets []string) string {
	if len(presets) == 0 {
		return "..."
	}
	return strings.Join(presets, "|")
}

func webSearchHint(picked map[string]bool) string {
	if picked[resolver.WebSearch] {
		return " with WebSearchSet{enabled:true}"
	}
	return ""
}

func availableOnly(reg *resolver.Registry, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if t, ok := reg.Tool(n); ok && t.Available {
			out = append(out, n)
		}
	}
	return out
}

// sameSetModuloWebSearch reports whether the picked set equals list as a
// set, or list plus web_search (the overlay applied to it).
func sameSetModuloWebSearch(picked map[string]bool, list []string) bool {
	if len(list) == 0 {
		return false
	}
	inList := make(map[string]bool, len(list)+1)
	for _, n := range list {
		inList[n] = true
	}
	if picked[resolver.WebSearch] {
		inList[resolver.WebSearch] = true
	}
	if len(inList) != len(picked) {
		return false
	}
	for n := range picked {
		if !inList[n] {
			return false
		}
	}
	return true
}

func decideLoaded(s State, reg *resolver.Registry, c events.DeferredLoaded) ([]events.Payload, error) {
	if len(c.Names) == 0 {
		return nil, fmt.Errorf("decide DeferredLoaded: no names, list the deferred tools tool_search loaded: %w", ErrInvalidCommand)
	}
	if len(c.Names) > events.MaxListLen {
		return nil, fmt.Errorf("decide DeferredLoaded: %d names, at most %d allowed: %w", len(c.Names), events.MaxListLen, ErrInvalidCommand)
	}
	if !s.InTurn {
		return nil, fmt.Errorf("decide DeferredLoaded: no turn is open (the last turn, %d, has ended); tool_search loads tools inside a turn, begin one first: %w", s.Turn, ErrInvalidCommand)
	}
	turn := c.Turn
	if turn == 0 {
		turn = s.Turn
	}
	if turn != s.Turn {
		return nil, fmt.Errorf("decide DeferredLoaded: turn %d, want the current turn %d: %w", c.Turn, s.Turn, ErrInvalidCommand)
	}
	var fresh []string
	for _, n := range c.Names {
		if err := knownTool(reg, "DeferredLoaded", n); err != nil {
			return nil, err
		}
		if _, ok := deferredIn(reg, n); !ok {
			return nil, fmt.Errorf("decide DeferredLoaded: tool %q is resident, not deferred, so it needs no load; list only deferred tools: %w", n, ErrInvalidCommand)
		}
		if _, found := slices.BinarySearch(s.Loaded, n); found || slices.Contains(fresh, n) {
			continue
		}
		if _, off := slices.BinarySearch(s.Intent.Disabled, n); off {
			return nil, fmt.Errorf("decide DeferredLoaded: tool %q is disabled in this session; enable it (ToolEnabled) before loading it: %w: %w", n, ErrToolDisabled, ErrInvalidCommand)
		}
		fresh = append(fresh, n)
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if len(s.Loaded)+len(fresh) > events.MaxListLen {
		return nil, fmt.Errorf("decide DeferredLoaded: %d tools would be loaded, at most %d allowed: %w", len(s.Loaded)+len(fresh), events.MaxListLen, ErrInvalidCommand)
	}
	return one(events.DeferredLoaded{Names: fresh, Turn: turn}), nil
}

// decideEvicted: between turns (after turn s.Turn; Turn 0 means it), a
// reason, and names of which only the loaded ones are kept; none loaded is
// a no-op.
func decideEvicted(s State, c events.DeferredEvicted) ([]events.Payload, error) {
	if len(c.Names) == 0 || len(c.Names) > events.MaxListLen {
		return nil, fmt.Errorf("decide DeferredEvicted: %d names, want 1 to %d loaded tools: %w", len(c.Names), events.MaxListLen, ErrInvalidCommand)
	}
	if s.InTurn {
		return nil, fmt.Errorf("decide DeferredEvicted: turn %d is open; evict between turns, before the next TurnStarted: %w", s.Turn, ErrInvalidCommand)
	}
	if c.Turn == 0 {
		c.Turn = s.Turn
	}
	if c.Turn != s.Turn {
		return nil, fmt.Errorf("decide DeferredEvicted: after turn %d, want the last turn %d: %w", c.Turn, s.Turn, ErrInvalidCommand)
	}
	var names []string
	for _, n := range c.Names {
		if _, found := slices.BinarySearch(s.Loaded, n); found && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	c.Names = names
	if err := events.CheckStored(events.Envelope{ID: "decide", Payload: c}, "decide"); err != nil {
		return nil, fmt.Errorf("decide DeferredEvicted: %w: %w", err, ErrInvalidCommand)
	}
	return one(c), nil
}

// loadedOnly reports whether c's contract lists exactly its loaded tools,
// each once: the form a checkpoint is written in, sized by what the turn
// loaded. Any other list is the older form, the whole contract.
func loadedOnly(c events.CheckpointRecorded) bool {
	loaded := sortedSet(c.Loaded)
	if len(c.Contract) != len(loaded) {
		return false
	}
	seen := make(map[string]bool, len(c.Contract))
	for _, e := range c.Contract {
		if seen[e.Name] {
			return false
		}
		seen[e.Name] = true
		if _, found := slices.BinarySearch(loaded, e.Name); !found {
			return false
		}
	}
	return true
}

func decideCheckpoint(s State, reg *resolver.Registry, c events.CheckpointRecorded) ([]events.Payload, error) {
	if c.RegistryVersion == "" {
		return nil, fmt.Errorf("decide CheckpointRecorded: registry_version is empty, record the registry version of the contract (see docs/semantics.md#checkpoints): %w", ErrInvalidCommand)
	}
	turn := c.Turn
	if turn == 0 {
		turn = s.Turn
	}
	if turn > s.Turn {
		return nil, fmt.Errorf("decide CheckpointRecorded: turn %d is after the last started turn %d: %w", c.Turn, s.Turn, ErrInvalidCommand)
	}
	if len(c.Loaded) > events.MaxListLen {
		return nil, fmt.Errorf("decide CheckpointRecorded: %d loaded tools, at most %d allowed: %w", len(c.Loaded), events.MaxListLen, ErrInvalidCommand)
	}
	if len(c.Contract) > events.MaxContractLen {
		return nil, fmt.Errorf("decide CheckpointRecorded: contract has %d entries, at most %d allowed: %w", len(c.Contract), events.MaxContractLen, ErrInvalidCommand)
	}
	inContract := make(map[string]bool, len(c.Contract))
	for i, e := range c.Contract {
		if err := events.ValidateToolName(e.Name); err != nil {
			return nil, fmt.Errorf("decide CheckpointRecorded: contract[%d]: %w: %w", i, err, ErrInvalidCommand)
		}
		inContract[e.Name] = true
	}
	live := c.RegistryVersion == reg.Version()
	for _, n := range c.Loaded {
		if err := events.ValidateToolName(n); err != nil {
			return nil, fmt.Errorf("decide CheckpointRecorded: %w: %w", err, ErrInvalidCommand)
		}
		if !inContract[n] {
			if _, known := reg.Tool(n); !known && live {
				return nil, fmt.Errorf("decide CheckpointRecorded: loaded tool %q is not in registry %s, check the name: %w", n, reg.Version(), ErrUnknownTool)
			}
			return nil, fmt.Errorf("decide CheckpointRecorded: loaded tool %q is not in the recorded contract; every loaded name must belong to it (see docs/semantics.md#checkpoints): %w", n, ErrInvalidCommand)
		}
		if live {
			t, _ := reg.Tool(n)
			if !t.Deferred || reg.IsResident(n) {
				return nil, fmt.Errorf("decide CheckpointRecorded: loaded tool %q is resident in registry %s, not deferred, so it is never loaded; record only deferred tools: %w", n, reg.Version(), ErrInvalidCommand)
			}
		}
	}
	if !events.ValidHash(c.ContractHash) {
		return nil, fmt.Errorf("decide CheckpointRecorded: contract_hash %q is not a SHA-256 in lower-case hex (%d digits); record the hash of the contract the loaded set belongs to (see docs/semantics.md#checkpoints): %w", clip.String(c.ContractHash, clip.Max), events.HashLen, ErrInvalidCommand)
	}
	if c.Contract != nil && !loadedOnly(c) {
		// The older form lists the whole contract: its entries add up to
		// the contract hash.
		hashes := make([]string, len(c.Contract))
		for i, e := range c.Contract {
			if !events.ValidHash(e.Hash) {
				return nil, fmt.Errorf("decide CheckpointRecorded: contract[%d] (%s) hash %q is not a SHA-256 in lower-case hex: %w", i, e.Name, clip.String(e.Hash, clip.Max), ErrInvalidCommand)
			}
			hashes[i] = e.Hash
		}
		sum, err := resolver.ContractHashFromToolHashes(c.RegistryVersion, hashes)
		if err != nil {
			return nil, fmt.Errorf("decide CheckpointRecorded: %w: %w", err, ErrInvalidCommand)
		}
		if sum != c.ContractHash {
			return nil, fmt.Errorf("decide CheckpointRecorded: contract has %d entries for %d loaded tools, and as a whole contract of registry %s they add up to %s, not contract_hash %s; list exactly the loaded tools with their hashes (see docs/wire-format.md#checkpoints): %w", len(c.Contract), len(sortedSet(c.Loaded)), c.RegistryVersion, sum, c.ContractHash, ErrInvalidCommand)
		}
	}
	for i, e := range c.Contract {
		if !events.ValidHash(e.Hash) {
			return nil, fmt.Errorf("decide CheckpointRecorded: contract[%d] (%s) hash %q is not a SHA-256 in lower-case hex: %w", i, e.Name, clip.String(e.Hash, clip.Max), ErrInvalidCommand)
		}
	}
	out := c
	out.Turn = turn
	out.Loaded = sortedSet(c.Loaded)
	if out.Loaded == nil {
		out.Loaded = []string{}
	}
	out.Contract = slices.Clone(c.Contract)
	return one(out), nil
}
