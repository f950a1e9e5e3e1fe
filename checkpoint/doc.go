// Package checkpoint records and restores a session's loaded deferred tools
// across a restart (R19, R20), and records each provider dispatch's
// resident/deferred classification for inspection (R21).
//
// A Record is taken at a persistence safe point: it lists
// loaded_deferred_tools, every one of which is a deferred tool of the
// resolution (the tool contract) it is recorded with, plus that contract's
// hash, its registry version and a per-tool hash list. New refuses any
// other name. Resume verifies the recorded contract hash against the
// current contract before it restores anything: an equal hash restores
// exactly the recorded names; a changed contract restores nothing and says
// what changed (tools added, removed or changed, the registry version).
// Restoring nothing is the documented choice for a changed contract: the
// loaded set is small and tool_search loads a tool again in one call, while
// restoring a tool whose contract moved would hand the model a schema it
// did not choose.
//
// Resume never replays completed searches and never infers load state or
// permission from tool-result text: it reads only the Record and the
// current Resolution. A checkpoint written by an older writer without the
// loaded_deferred_tools field restores the empty set.
//
// The package is pure: no I/O, no clock, no NATS. Storage is the event log
// (events.CheckpointRecorded); Record.Event and FromEvent convert. All
// functions are deterministic and safe for concurrent use; none modifies
// its arguments.
package checkpoint
