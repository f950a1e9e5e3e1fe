package aggregate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// The fold applies the API's materialization guard
// and loaded-tool rule against the registry in force when each event was
// stored, whoever published it: a picked list equal to a whole preset or
// to the defaults, and a load of a tool the registry lacks or keeps
// resident, are kept, not applied and reported; Decide, given the same
// registry, refuses the same commands.
func TestFoldAppliesRegistryRules(t *testing.T) {
	reg := resolver.Default()
	research, ok := reg.Preset("research")
	if !ok || len(research) > events.MaxPicked {
		t.Fatalf("the embedded registry's research preset: %v (%v); the test wants one within the wire bound", research, ok)
	}
	small := smallRegistry(t)
	cases := []struct {
		name   string
		reg    *resolver.Registry
		p      events.Payload
		reason string // "" : applied
	}{
		{"picked = research", reg, events.ToolsPicked{Names: slices.Clone(research)}, `the whole preset "research" of registry ` + reg.Version()},
		{"picked = research in another order", reg, events.ToolsPicked{Names: reversed(research)}, `the whole preset "research"`},
		{"picked = defaults", small, events.ToolsPicked{Names: small.DefaultTools()}, "equals the defaults of registry " + small.Version()},
		{"picked, a curated list", reg, events.ToolsPicked{Names: []string{"read_file", "grep"}}, ""},
		{"picked unset", reg, events.ToolsPicked{}, ""},
		{"load of an unknown tool", reg, events.DeferredLoaded{Names: []string{"no_such_tool"}, Turn: 1}, `tool "no_such_tool" is not in registry ` + reg.Version()},
		{"load of a resident tool", reg, events.DeferredLoaded{Names: []string{"send_message", "bash"}, Turn: 1}, `tool "bash" is resident in registry`},
		{"load of a deferred tool", reg, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs := stored(events.TurnStarted{Turn: 1}, c.p)
			evs[1].Registry = c.reg
			s := Fold(testSession, evs[:1])
			verdict := s.CheckAt(evs[1].Envelope, evs[1].MsgID, c.reg)
			err := s.ApplyStored(evs[1])
			if (verdict == nil) != (err == nil) {
				t.Fatalf("CheckAt says %v, ApplyStored %v", verdict, err)
			}
			_, derr := Decide(Fold(testSession, evs[:1]), c.reg, c.p, Limits{})
			if c.reason == "" {
				if err != nil || s.Events != 2 || derr != nil {
					t.Fatalf("fold %v (state %+v), Decide %v; want both to accept", err, s, derr)
				}
				return
			}
			if !errors.Is(err, ErrRejected) || !errors.Is(err, events.ErrBrokenRule) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("fold verdict %v, want rejected naming %q", err, c.reason)
			}
			if s.Rejected != 1 || s.Events != 1 || s.LastSeq != 2 || s.Intent.Picked != nil || s.Loaded != nil ||
				len(s.Rejections) != 1 || s.Rejections[0].Seq != 2 || s.Rejections[0].Kind != KindRejected || !strings.Contains(s.Rejections[0].Reason, c.reason) {
				t.Fatalf("state %+v: want the event kept out, counted and reported", s)
			}
			if derr == nil {
				t.Fatalf("Decide accepts %#v, which the fold rejects", c.p)
			}
			// Without a registry in force (nothing recorded by then) the
			// rules that need one are not checked.
			s2 := Fold(testSession, evs[:1])
			evs[1].Registry = nil
			if err := s2.ApplyStored(evs[1]); err != nil {
				t.Fatalf("without a registry: %v, want applied", err)
			}
		})
	}
}

func reversed(xs []string) []string {
	out := slices.Clone(xs)
	slices.Reverse(out)
	return out
}
