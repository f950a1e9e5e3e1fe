package events

import (
	"reflect"
	"testing"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"
)

var (
	genName    = rapid.StringMatching(`[a-z][a-z0-9_-]{0,20}`)
	genSession = rapid.StringMatching(`[A-Za-z0-9_-]{1,40}`)
	genText    = rapid.StringN(0, 20, MaxTextLen)
	// genOrigin draws a channel or actor: a version-2 event names both.
	genOrigin = rapid.StringN(1, 20, MaxTextLen)
)

// genTri draws an unset, false or true tri-state.
func genTri(t *rapid.T, label string) *bool {
	switch rapid.IntRange(0, 2).Draw(t, label) {
	case 1:
		return bp(false)
	case 2:
		return bp(true)
	}
	return nil
}

// genNames draws nil, an empty list or a short list, so nil versus empty
// is exercised.
func genNames(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 2).Draw(t, label+"_kind") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(genName, 1, 8).Draw(t, label)
}

func genNonEmptyNames(t *rapid.T, label string) []string {
	return rapid.SliceOfN(genName, 1, 8).Draw(t, label)
}

func genPayload(t *rapid.T) Payload {
	switch Types()[rapid.IntRange(0, len(allTypes)-1).Draw(t, "type")] {
	case TypeToolsToggled:
		return ToolsToggled{Enabled: genTri(t, "enabled")}
	case TypeWebSearchSet:
		return WebSearchSet{Enabled: genTri(t, "enabled")}
	case TypePresetChosen:
		if rapid.Bool().Draw(t, "unset") {
			return PresetChosen{}
		}
		return PresetChosen{Preset: genName.Draw(t, "preset")}
	case TypeToolDisabled:
		return ToolDisabled{Name: genName.Draw(t, "name")}
	case TypeToolEnabled:
		return ToolEnabled{Name: genName.Draw(t, "name")}
	case TypeToolsPicked:
		return ToolsPicked{Names: genNames(t, "names")}
	case TypeDeferredLoaded:
		return DeferredLoaded{Names: genNames(t, "names"), Turn: rapid.Uint64().Draw(t, "turn")}
	case TypeTurnStarted:
		return TurnStarted{Turn: rapid.Uint64().Draw(t, "turn")}
	case TypeTurnEnded:
		te := TurnEnded{Turn: rapid.Uint64().Draw(t, "turn")}
		if rapid.Bool().Draw(t, "with_checkpoint") {
			c := genCheckpoint(t)
			te.Checkpoint = &c
		}
		return te
	case TypeDeferredEvicted:
		return DeferredEvicted{Names: genNonEmptyNames(t, "names"), Turn: rapid.Uint64().Draw(t, "turn"), Reason: genText.Draw(t, "reason")}
	case TypeSessionDeleted:
		return SessionDeleted{Reason: genText.Draw(t, "reason")}
	case TypeSessionCompacted:
		return genCompacted(t)
	case TypePermissionGranted:
		return PermissionGranted{By: genName.Draw(t, "by"), Scope: rapid.SampledFrom([]string{ScopeSession, ScopeOnce}).Draw(t, "scope"), Tool: genName.Draw(t, "tool"), Turn: rapid.Uint64().Draw(t, "turn")}
	default:
		return genCheckpoint(t)
	}
}

// genCompacted draws a SessionCompacted payload, with nil versus
// empty lists and an optional checkpoint.
func genCompacted(t *rapid.T) SessionCompacted {
	c := SessionCompacted{
		FirstSeq: rapid.Uint64().Draw(t, "first_seq"), LastSeq: rapid.Uint64().Draw(t, "last_seq"),
		Count: rapid.Uint64().Draw(t, "count"), FirstMs: rapid.Int64().Draw(t, "first_ms"), LastMs: rapid.Int64().Draw(t, "last_ms"),
		Reason: genText.Draw(t, "reason"),
		Loaded: genNames(t, "loaded"), Referenced: genNames(t, "referenced"),
		Turn: rapid.Uint64().Draw(t, "turn"), TurnSeq: rapid.Uint64().Draw(t, "turn_seq"),
		Events: rapid.Uint64().Draw(t, "events"), Skipped: rapid.Uint64().Draw(t, "skipped"), Rejected: rapid.Uint64().Draw(t, "rejected"),
		GrantsTurn: rapid.Uint64().Draw(t, "grants_turn"),
	}
	c.Intent.Enabled = genTri(t, "enabled")
	c.Intent.WebSearch = genTri(t, "web_search")
	c.Intent.Disabled = genNames(t, "disabled")
	c.Intent.Picked = genNames(t, "picked")
	if rapid.Bool().Draw(t, "preset_set") {
		c.Intent.Preset = genName.Draw(t, "preset")
	}
	if rapid.Bool().Draw(t, "with_checkpoint") {
		cp := genCheckpoint(t)
		c.Checkpoint, c.CheckpointSeq = &cp, rapid.Uint64().Draw(t, "checkpoint_seq")
	}
	switch rapid.IntRange(0, 2).Draw(t, "rejections_kind") {
	case 1:
		c.Rejections = []CompactedRejection{}
	case 2:
		for range rapid.IntRange(1, MaxCompactedRejections).Draw(t, "rejections") {
			c.Rejections = append(c.Rejections, CompactedRejection{Seq: rapid.Uint64().Draw(t, "rseq"), ID: genText.Draw(t, "rid"), Type: genText.Draw(t, "rtype"), Kind: genText.Draw(t, "rkind"), Reason: genText.Draw(t, "rreason")})
		}
	}
	switch rapid.IntRange(0, 2).Draw(t, "grants_kind") {
	case 1:
		c.Grants = []CompactedGrant{}
	case 2:
		for range rapid.IntRange(1, 4).Draw(t, "grants") {
			c.Grants = append(c.Grants, CompactedGrant{Tool: genName.Draw(t, "gtool"), Scope: rapid.SampledFrom([]string{ScopeSession, ScopeOnce}).Draw(t, "gscope"), By: genName.Draw(t, "gby"), Channel: genText.Draw(t, "gchannel"), Turn: rapid.Uint64().Draw(t, "gturn"), Seq: rapid.Uint64().Draw(t, "gseq")})
		}
	}
	return c
}

// genCheckpoint draws a valid CheckpointRecorded payload.
func genCheckpoint(t *rapid.T) CheckpointRecorded {
	{
		c := CheckpointRecorded{
			Loaded:          genNames(t, "loaded"),
			ContractHash:    genText.Draw(t, "hash"),
			RegistryVersion: genText.Draw(t, "version"),
			Turn:            rapid.Uint64().Draw(t, "turn"),
		}
		switch rapid.IntRange(0, 2).Draw(t, "contract_kind") {
		case 1:
			c.Contract = []ContractEntry{}
		case 2:
			for _, n := range rapid.SliceOfN(genName, 1, 4).Draw(t, "contract") {
				c.Contract = append(c.Contract, ContractEntry{Name: n, Hash: genText.Draw(t, "h")})
			}
		}
		return c
	}
}

// genEnvelope draws a valid envelope of any type.
func genEnvelope(t *rapid.T) Envelope {
	var id ulid.ULID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "id"))
	_ = id.SetTime(rapid.Uint64Range(0, ulid.MaxTime()).Draw(t, "idtime"))
	p := genPayload(t)
	return Envelope{
		ID:      id.String(),
		Session: genSession.Draw(t, "session"),
		Channel: genOrigin.Draw(t, "channel"),
		Actor:   genOrigin.Draw(t, "actor"),
		TimeMs:  rapid.Int64().Draw(t, "time"),
		Version: SchemaVersion,
		Type:    p.EventType(),
		Payload: p,
	}
}

// Encode→Decode is the identity on valid envelopes, including nil
// versus empty lists and unset tri-states ("unset reads back unset").
func TestPropertyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope(t)
		b, err := Encode(e)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", e, err)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(d, e) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", d, e)
		}
		b2, err := Encode(d)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("encoding not deterministic")
		}
	})
}

// A pointer payload encodes like its value.
func TestPropertyPointerPayload(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope(t)
		v := reflect.New(reflect.TypeOf(e.Payload))
		v.Elem().Set(reflect.ValueOf(e.Payload))
		ep := e
		ep.Payload = v.Interface().(Payload)
		a, err1 := Encode(e)
		b, err2 := Encode(ep)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("pointer payload encodes differently: %v %v", err1, err2)
		}
	})
}
