package aggregate

import (
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"pgregory.net/rapid"
)

// blameRegistryJSON has presets and profiles of every kind, so that every
// rule of Explain can decide.
const blameRegistryJSON = `{
  "version": "blame-1",
  "tools": [
    {"name":"read_file","description":"r","parameters":{"type":"object"},"permission":"read"},
    {"name":"grep","description":"g","parameters":{"type":"object"},"permission":"read"},
    {"name":"bash","description":"b","parameters":{"type":"object"},"permission":"exec"},
    {"name":"tool_search","description":"t","parameters":{"type":"object"},"permission":"read"},
    {"name":"web_search","description":"w","parameters":{"type":"object"},"permission":"network"},
    {"name":"big_browser","description":"p","parameters":{"type":"object"},"permission":"network"},
    {"name":"gpu_run","description":"x","parameters":{"type":"object"},"available":false,"permission":"exec"}
  ],
  "default_tools": ["read_file","grep","bash","tool_search","big_browser"],
  "deferred_default_tools": ["big_browser"],
  "presets": {"tiny": ["read_file","tool_search"], "ops": ["bash","grep","tool_search","gpu_run"], "web": ["read_file","web_search","tool_search"]},
  "profiles": {"coder": {"preset": "ops"}, "reader": {"tools": ["read_file","web_search"]}, "helper": {"allowed": ["read_file","grep","tool_search"]}}
}`

var blameTools = rapid.SampledFrom([]string{"read_file", "grep", "bash", "tool_search", "web_search", "big_browser", "gpu_run", "zz"})

// genIntentEvent draws an intent event, including ones Decide would drop
// as no-ops (a direct publisher can write them), and now and then an event
// that does not touch the intent.
func genIntentEvent(t *rapid.T) events.Payload {
	switch rapid.IntRange(0, 7).Draw(t, "ev") {
	case 0:
		return events.ToolsToggled{Enabled: genTri(t, "enabled")}
	case 1:
		return events.WebSearchSet{Enabled: genTri(t, "ws")}
	case 2:
		return events.PresetChosen{Preset: rapid.SampledFrom([]string{"", "tiny", "ops", "web"}).Draw(t, "preset")}
	case 3:
		return events.ToolDisabled{Name: blameTools.Draw(t, "off")}
	case 4:
		return events.ToolEnabled{Name: blameTools.Draw(t, "on")}
	case 5:
		if rapid.Bool().Draw(t, "unpick") {
			return events.ToolsPicked{}
		}
		return events.ToolsPicked{Names: rapid.SliceOfNDistinct(blameTools, 1, 3, rapid.ID[string]).Draw(t, "picked")}
	case 6:
		return events.TurnStarted{Turn: rapid.Uint64Range(1, 3).Draw(t, "turn")}
	}
	return events.DeferredLoaded{Names: []string{"big_browser"}}
}

func genOverride(t *rapid.T) intent.Override {
	switch rapid.IntRange(0, 7).Draw(t, "override") {
	case 0:
		return intent.Override{Kind: intent.OverrideEmpty}
	case 1:
		return intent.Override{Kind: intent.OverrideNames, Names: []string{"grep", "web_search"}}
	case 2:
		return intent.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Preset: "web"}}
	}
	return intent.Override{}
}

// The event Blame names is the one that last changed the explanation.
//
// For a random registry request (tool, profile, per-turn override) and a
// random log of intent events (no-ops and repeats included), let E(k) be
// the outcome and deciding rule (Included, Rule) of the registry's
// explanation of the tool after the first k events, and N the event Blame
// names (index n, 1-based). Then:
//
//  1. Blame's explanation is the registry's explanation of the whole log.
//  2. When N exists: E(n-1) != E(n) — removing N from the log that ends
//     with it changes the explanation (its rule or its outcome) —
//     and E(j) == E(len(log)) for every j >= n — no later event changes it,
//     so removing any later event from the log that ends with that event
//     changes nothing.
//  3. When no event is named: E(k) == E(0) for every k — the explanation
//     is the one of a session without events (profile, registry or
//     override decide).
//
// What is not checkable: that removing N from the whole log changes the
// final explanation. Causes can be overdetermined: after ToolDisabled
// grep, PresetChosen ops (grep now in the base: disabled-by-session, the
// blamed change) and ToolsToggled true (grep in the base either way),
// removing the preset event leaves grep disabled-by-session through the
// defaults. Rapid finds such logs at once, so the property states what a
// "last change" guarantees and no more.
func TestPropertyBlameNamesTheLastChange(t *testing.T) {
	reg, err := resolver.Load([]byte(blameRegistryJSON))
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		tool := blameTools.Draw(t, "tool")
		profile := rapid.SampledFrom([]string{"", "", "coder", "reader", "helper"}).Draw(t, "profile")
		override := genOverride(t)
		n := rapid.IntRange(0, 25).Draw(t, "n")
		log := make([]events.Payload, n)
		for i := range log {
			log[i] = genIntentEvent(t)
		}
		// The explanation compared: outcome and deciding rule.
		type outcome struct {
			included bool
			rule     string
		}
		explainOf := func(ps []events.Payload) outcome {
			s := Fold(testSession, stored(ps...))
			ex := reg.Explain(resolver.Request{Override: override, Session: s.Intent, Profile: profile}, tool)
			return outcome{ex.Included, ex.Rule}
		}
		b := NewBlame(reg, testSession, tool, override, profile)
		for i, st := range stored(log...) {
			changed := b.Apply(Stored{Seq: st.Seq, MsgID: st.Envelope.ID, Envelope: st.Envelope})
			if changed != (explainOf(log[:i]) != explainOf(log[:i+1])) {
				t.Fatalf("event %d (%T): Apply reported changed=%v", i+1, log[i], changed)
			}
		}
		final := explainOf(log)
		whole := Fold(testSession, stored(log...))
		if b.Explanation() != reg.Explain(resolver.Request{Override: override, Session: whole.Intent, Profile: profile}, tool) { // 1
			t.Fatalf("blame explains %+v; the whole log explains %+v", b.Explanation(), final)
		}
		named := int(b.Seq()) // stored numbers events from 1
		if named == 0 {
			for k := 0; k <= n; k++ { // 3
				if explainOf(log[:k]) != explainOf(nil) {
					t.Fatalf("no event named, but after %d events the explanation is %+v, not the empty log's", k, explainOf(log[:k]))
				}
			}
			return
		}
		if explainOf(log[:named-1]) == explainOf(log[:named]) { // 2
			t.Fatalf("named event %d (%T) did not change the explanation", named, log[named-1])
		}
		for j := named; j <= n; j++ {
			if explainOf(log[:j]) != final {
				t.Fatalf("event %d, after the named %d, changed the explanation", j, named)
			}
		}
	})
}

// The case. After enable, web-search on, web-search off, the
// explanation of web_search blames the event that switched it off, not
// the master switch; with only enable and web-search off it blames the
// overlay event too (rule web_search=false). Turning tools on after
// off+web_search keeps the blame on the overlay event.
func TestBlameWebSearchOff(t *testing.T) {
	reg := resolver.Default()
	for _, tc := range []struct {
		log  []events.Payload
		want uint64
	}{
		{[]events.Payload{events.ToolsToggled{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(false)}}, 3},
		{[]events.Payload{events.ToolsToggled{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(false)}}, 2},
		{[]events.Payload{events.ToolsToggled{Enabled: bp(false)}, events.WebSearchSet{Enabled: bp(true)}, events.ToolsToggled{Enabled: bp(true)}, events.DeferredLoaded{Names: []string{"send_message"}}}, 2},
		{[]events.Payload{events.WebSearchSet{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(false)}, events.WebSearchSet{}}, 3},
	} {
		b := NewBlame(reg, testSession, resolver.WebSearch, intent.Override{}, "")
		for _, st := range stored(tc.log...) {
			b.Apply(Stored{Seq: st.Seq, MsgID: st.Envelope.ID, Envelope: st.Envelope})
		}
		if b.Seq() != tc.want {
			t.Errorf("log %v: blamed seq %d (%+v); want %d", tc.log, b.Seq(), b.Explanation(), tc.want)
		}
	}
}
