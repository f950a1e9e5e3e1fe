package events

import (
	"github.com/toolintent/engine/internal/clip"

	"errors"
	"fmt"
	"slices"
)

// MaxPicked bounds a ToolsPicked list on the wire: a longer list is an
// expanded tool list, which no session stores, whoever wrote it. The
// engine's API may be configured stricter, never looser.
const MaxPicked = 16

// HashLen is the length of every hash an event carries (contract_hash and
// each contract entry's hash): a SHA-256 in lower-case hex.
const HashLen = 64

// ErrBrokenRule means a decodable event breaks a rule of the fold:
// the log keeps it, every fold refuses to apply it and reports it.
var ErrBrokenRule = errors.New("event breaks a fold rule")

// CheckStored checks the fold rules that need nothing but the event as
// stored: the envelope e (decoded without error) and msgID, the value of
// its Nats-Msg-Id header ("" when the message has none). The rules:
//
//   - the Nats-Msg-Id header is present and equals the envelope id (the
//     id is the dedupe key: a message whose header names another id
//     was deduplicated as another event);
//   - ToolsPicked holds at most MaxPicked names, each once (a longer list
//     is an expanded tool list);
//   - CheckpointRecorded carries a valid contract: contract_hash and every
//     contract entry's hash are HashLen lower-case hex digits, the
//     registry version is not empty, and every loaded tool is an entry of
//     the contract (so a checkpoint that loads tools without a contract is
//     refused); so does a TurnEnded's checkpoint, and a
//     TurnEnded whose checkpoint breaks the rule is refused as a whole;
//   - TurnStarted's recorded request is well formed (see checkTurnStarted):
//     registry version and contract hash together, a valid hash, an
//     override of one form, curated lists within MaxPicked;
//   - SessionCompacted carries a coherent range and a state a fold can
//     reach (see checkCompacted).
//
// The rules that depend on the session (turn order, set bounds) are
// checked by the fold itself (package aggregate). CheckStored is pure and
// deterministic; errors match ErrBrokenRule and name the rule and the bad
// value.
func CheckStored(e Envelope, msgID string) error {
	if msgID != e.ID {
		if msgID == "" {
			return fmt.Errorf("event %s was stored without a Nats-Msg-Id header; publish every event with Nats-Msg-Id set to its id: %w", clip.String(e.ID, clip.Max), ErrBrokenRule)
		}
		return fmt.Errorf("event %s was stored with Nats-Msg-Id %q; the header must equal the event id: %w", clip.String(e.ID, clip.Max), clip.String(msgID, clip.Max), ErrBrokenRule)
	}
	p, _ := deref(e.Payload)
	switch v := p.(type) {
	case ToolsPicked:
		if len(v.Names) > MaxPicked {
			return fmt.Errorf("ToolsPicked has %d names, at most %d: a long list is an expanded tool list (see docs/semantics.md#picked-lists); store ToolsToggled or PresetChosen and ToolDisabled exceptions instead: %w", len(v.Names), MaxPicked, ErrBrokenRule)
		}
		for i, n := range v.Names {
			if slices.Contains(v.Names[:i], n) {
				return fmt.Errorf("ToolsPicked names %q twice; list each tool once: %w", n, ErrBrokenRule)
			}
		}
	case CheckpointRecorded:
		return checkCheckpoint(v)
	case TurnEnded:
		if v.Checkpoint != nil {
			if err := checkCheckpoint(*v.Checkpoint); err != nil {
				return fmt.Errorf("TurnEnded checkpoint: %w", err)
			}
		}
	case TurnStarted:
		return checkTurnStarted(v)
	case SessionCompacted:
		return checkCompacted(v)
	}
	return nil
}

func checkCheckpoint(v CheckpointRecorded) error {
	if !ValidHash(v.ContractHash) {
		return fmt.Errorf("CheckpointRecorded contract_hash %q is not %d lower-case hex digits (a SHA-256): %w", clip.String(v.ContractHash, clip.Max), HashLen, ErrBrokenRule)
	}
	if v.RegistryVersion == "" {
		return fmt.Errorf("CheckpointRecorded has no registry_version; record the registry version of its contract: %w", ErrBrokenRule)
	}
	for i, c := range v.Contract {
		if !ValidHash(c.Hash) {
			return fmt.Errorf("CheckpointRecorded contract[%d] (%s) hash %q is not %d lower-case hex digits: %w", i, c.Name, clip.String(c.Hash, clip.Max), HashLen, ErrBrokenRule)
		}
	}
	for _, n := range v.Loaded {
		if !slices.ContainsFunc(v.Contract, func(c ContractEntry) bool { return c.Name == n }) {
			if len(v.Contract) == 0 {
				return fmt.Errorf("CheckpointRecorded loads %q but records no contract; a checkpoint that loads tools lists the contract they belong to (see docs/semantics.md#checkpoints): %w", n, ErrBrokenRule)
			}
			return fmt.Errorf("CheckpointRecorded loads %q, which is not in its contract; a loaded tool belongs to the contract (see docs/semantics.md#checkpoints): %w", n, ErrBrokenRule)
		}
	}
	return nil
}

// ValidHash reports whether s is HashLen lower-case hex digits, the form of
// a SHA-256 as the engine writes it.
func ValidHash(s string) bool {
	if len(s) != HashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
