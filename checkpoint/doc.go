// Package checkpoint records and restores a session's loaded deferred tools
// across a restart, and records each provider dispatch's
// resident/deferred classification for inspection.
//
// A Record is taken at a persistence safe point: it lists
// loaded_deferred_tools, every one of which is a deferred tool of the
// resolution (the tool contract) it is recorded with, plus that contract's
// hash, its registry version and the per-tool hash of each loaded tool.
// It grows with what the turn loaded, never with the registry (Size).
// New refuses any other name. Resume verifies the recorded contract hash
// against the current contract before it restores anything: an equal
// hash restores exactly the recorded names; a changed contract is decided
// per tool: a loaded tool whose own contract entry (its per-tool
// hash) is unchanged and that the current resolution still has deferred
// is restored, every other one is dropped with its reason (removed,
// unavailable, not permitted by the intent, now resident, changed, not
// recorded), and Changes says what changed in the whole contract (tools
// added, removed or changed, the order, the registry version) when the
// caller rebuilds the recorded contract from the registry history
// (Sources.Recorded), else what changed of the loaded tools. A tool whose
// entry moved is never restored: that would hand the model a schema it
// did not load; tool_search loads the new one in one call. Checkpoints of
// older writers list every tool of the contract (FullContract), and still
// resume; one without per-tool hashes is decided from the recorded
// contract when the registry history has it, and otherwise proves nothing
// of a changed contract and restores nothing.
//
// Resume never replays completed searches and never infers load state or
// permission from tool-result text: it reads only the Record and the
// current Resolution. A checkpoint written by an older writer without the
// loaded_deferred_tools field restores the empty set.
//
// The package is pure: no I/O, no clock, no NATS. Storage is the event log
// (events.CheckpointRecorded, which Record is, so nothing converts, or the
// checkpoint a TurnEnded carries). All
// functions are deterministic and safe for concurrent use; none modifies
// its arguments.
package checkpoint
