package service

import (
	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// The API's replies: the transports send what Requests returns. A
// reply is a wire type where wire has one with the same JSON; the types
// below carry command objects (Command) or engine results, and encode to
// the JSON of wire's type of the same role.

// HistoryListMax is the most names a history entry lists in each of
// tools, provider, catalog, gained, lost and its dispatch's lists: an
// entry of a registry of 10,000 tools summarises them (Lists counts
// them), so a page stays bounded by wire.MaxHistoryPageBytes and one
// entry.
const HistoryListMax = 64

// summarise cuts each list of e to HistoryListMax names and, when it cut
// one, records every list's full length in e.Lists.
func summarise(e *wire.HistoryPoint) {
	l := wire.EntryLists{Tools: len(e.Tools), Provider: len(e.Provider), Catalog: len(e.Catalog), Gained: len(e.Gained), Lost: len(e.Lost)}
	long := max(l.Tools, l.Provider, l.Catalog, l.Gained, l.Lost) > HistoryListMax
	if d := e.Dispatch; d != nil {
		l.Resident, l.Deferred, l.Loaded = len(d.Resident), len(d.Deferred), len(d.Loaded)
		long = long || max(l.Resident, l.Deferred, l.Loaded) > HistoryListMax
	}
	if !long {
		return
	}
	e.Tools, e.Provider, e.Catalog = page(e.Tools, 0, HistoryListMax), page(e.Provider, 0, HistoryListMax), page(e.Catalog, 0, HistoryListMax)
	if e.Gained != nil {
		e.Gained = page(e.Gained, 0, HistoryListMax)
	}
	if e.Lost != nil {
		e.Lost = page(e.Lost, 0, HistoryListMax)
	}
	if d := e.Dispatch; d != nil {
		c := *d
		c.Resident, c.Deferred, c.Loaded = page(d.Resident, 0, HistoryListMax), page(d.Deferred, 0, HistoryListMax), page(d.Loaded, 0, HistoryListMax)
		e.Dispatch = &c
	}
	e.Lists = &l
}

// LiveEvent is one event of a live stream, its payload a command object.
type LiveEvent = wire.LiveEventOf[*Command]

// LiveEventOf is r as a live stream sends it.
func LiveEventOf(r WatchedEvent) LiveEvent {
	e := LiveEvent{
		EventRef: wire.EventRef{Seq: r.Seq, ID: r.Envelope.ID, Type: string(r.Envelope.Type), Channel: r.Envelope.Channel, Actor: r.Envelope.Actor, Time: r.Time},
		Session:  r.Session,
	}
	if r.Err != nil {
		e.Error = r.Err.Error()
	}
	if r.Envelope.Payload != nil {
		e.Payload = &Command{r.Envelope.Payload}
	}
	return e
}

// mapped is xs with f applied to each element, nil for nil: a core
// list as a reply carries it.
func mapped[T, U any](xs []T, f func(T) U) []U {
	if xs == nil {
		return nil
	}
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func wireClass(c deferral.Class) wire.Classification { return wire.Classification(c) }

func orEmpty(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// SessionOf is a session's state as the API shows it (session.intent).
func SessionOf(st aggregate.State) wire.Session {
	v := wire.Session{
		Session: st.Session, Seq: st.LastSeq, Intent: st.Intent, Loaded: orEmpty(st.Loaded),
		Turn: st.Turn, InTurn: st.InTurn, Events: st.Events, Skipped: st.Skipped, Rejected: st.Rejected,
	}
	for _, r := range st.Rejections {
		v.Rejections = append(v.Rejections, wire.Rejection{Seq: r.Seq, ID: r.ID, Type: r.Type, Kind: r.Kind, Reason: r.Reason})
	}
	if cp := st.Checkpoint; cp != nil {
		v.Checkpoint = &wire.Checkpoint{
			Loaded: orEmpty(cp.Loaded), ContractHash: cp.ContractHash, RegistryVersion: cp.RegistryVersion,
			Turn: cp.Turn, Seq: cp.Seq, Contract: wireContract(cp.Contract),
		}
	}
	return v
}

func wireCheckpoint(r checkpoint.Record, seq uint64) wire.Checkpoint {
	return wire.Checkpoint{
		Loaded: orEmpty(r.Loaded), ContractHash: r.ContractHash, RegistryVersion: r.RegistryVersion,
		Turn: r.Turn, Seq: seq, Contract: wireContract(r.Contract),
	}
}

func wireContract(c []events.ContractEntry) []wire.ContractEntry {
	var out []wire.ContractEntry
	for _, e := range c {
		out = append(out, wire.ContractEntry(e))
	}
	return out
}

func wireResume(session string, r ResumeResult) wire.ResumeReply {
	out := wire.ResumeReply{
		Session: session, Seq: r.Seq,
		Outcome: wire.ResumeOutcome{Restored: orEmpty(r.Outcome.Restored), OK: r.Outcome.OK, Reason: r.Outcome.Reason, Tools: []wire.ResumeDecision{}},
	}
	for _, d := range r.Outcome.Tools {
		out.Outcome.Tools = append(out.Outcome.Tools, wire.ResumeDecision{Tool: d.Tool, Kind: string(d.Kind), Rule: d.Rule, Reason: d.Reason})
	}
	for _, c := range r.Outcome.Changes {
		out.Outcome.Changes = append(out.Outcome.Changes, wire.ContractChange{Tool: c.Tool, Kind: string(c.Kind), From: c.From, To: c.To, Description: c.String()})
	}
	if r.Checkpoint != nil {
		cp := wireCheckpoint(*r.Checkpoint, 0)
		out.Checkpoint = &cp
	}
	return out
}

// wireHistoryEntry is h as a history page carries it: its payload a
// command object, its lists cut to HistoryListMax names.
func wireHistoryEntry(h HistoryEntry) wire.HistoryEntryOf[*Command] {
	e := wire.HistoryEntryOf[*Command]{EventRef: h.EventRef, HistoryPoint: h.HistoryPoint}
	e.Tools, e.Provider, e.Catalog, e.Loaded = orEmpty(h.Tools), orEmpty(h.Provider), orEmpty(h.Catalog), orEmpty(h.Loaded)
	if h.Payload != nil {
		e.Payload = &Command{h.Payload}
	}
	summarise(&e.HistoryPoint)
	return e
}

func wireDispatch(session string, d checkpoint.Dispatch) wire.DispatchRecord {
	return wire.DispatchRecord{
		Session: session, Turn: d.Turn, ContractHash: d.ContractHash,
		Resident: orEmpty(d.Resident), Deferred: orEmpty(d.Deferred), Loaded: orEmpty(d.Loaded), AtMs: d.At,
	}
}

func wireRegistry(reg *resolver.Registry) wire.RegistryInfo {
	info := wire.RegistryInfo{
		Version: reg.Version(), Tools: []wire.RegistryTool{},
		DefaultTools: orEmpty(reg.DefaultTools()), ResidentTools: orEmpty(reg.ResidentTools()),
		DeferredDefaultTools: orEmpty(reg.DeferredDefaultTools()),
		Presets:              map[string][]string{}, Profiles: []wire.Profile{},
	}
	for _, t := range reg.Tools() {
		ti := wire.RegistryTool{Name: t.Name, Description: t.Description, Available: t.Available, Deferred: t.Deferred, Permission: t.Permission}
		if len(t.Native.Anthropic) > 0 {
			ti.Native = append(ti.Native, ProviderAnthropic)
		}
		if len(t.Native.OpenAI) > 0 {
			ti.Native = append(ti.Native, ProviderOpenAI)
		}
		info.Tools = append(info.Tools, ti)
	}
	for _, name := range reg.PresetNames() {
		list, _ := reg.Preset(name)
		info.Presets[name] = orEmpty(list)
	}
	for _, name := range reg.ProfileNames() {
		if p, ok := reg.Profile(name); ok {
			if p.Name == "" {
				p.Name = name
			}
			info.Profiles = append(info.Profiles, wire.Profile(p))
		}
	}
	return info
}

// wireTool is t as a reply carries it: its contract, without the
// engine's deferral mark and search embedding.
func wireTool(t resolver.Tool) wire.Tool {
	return wire.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Available: t.Available, Permission: t.Permission, Native: t.Native}
}
