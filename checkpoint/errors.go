package checkpoint

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotInContract is wrapped when a loaded name is not a deferred tool
	// of the contract it is recorded with: a name outside the
	// resolution, or a resident tool (resident tools need no loading). New
	// returns it, and Outcome.Err returns it for a checkpoint that breaks
	// the rule against its own, unchanged contract.
	ErrNotInContract = errors.New("loaded tool is not a deferred tool of its contract")
	// ErrContractChanged is wrapped by Outcome.Err when the recorded
	// contract hash differs from the current one and loaded tools were
	// dropped: changed, removed, not permitted or unverifiable.
	ErrContractChanged = errors.New("tool contract changed since the checkpoint")
	// ErrNoContract is returned by New when it is given no resolution to
	// record the loaded set against.
	ErrNoContract = errors.New("no tool contract")
)
