package wire

// The session lifecycle operations: delete, erase and compact.

import "time"

// DeleteRequest deletes a session. Reason is optional and must not
// name a person. Erase also purges the session's events (allowed to the
// engine's erase channel only); over HTTP it is the query parameter
// erase=true.
type DeleteRequest struct {
	Session string `json:"session"`
	Reason  string `json:"reason,omitempty"`
	Erase   bool   `json:"erase,omitempty"`
	Actor   string `json:"actor,omitempty"`
}

// DeleteReply is the outcome of a delete: the sequence of the
// SessionDeleted (0 when an erase found the session deleted already)
// and, for an erase, the purged range and the audit record's sequence.
type DeleteReply struct {
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
	Erased  bool   `json:"erased"`
	// FirstSeq and LastSeq bound the purged events (erase only).
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	// Purged counts the purged events (erase only).
	Purged uint64 `json:"purged,omitempty"`
	// AuditSeq is the audit record's sequence in its stream (erase only).
	AuditSeq uint64 `json:"audit_seq,omitempty"`
}

// CompactRequest compacts a session. Reason is optional and must
// not name a person; it is recorded on the SessionCompacted.
type CompactRequest struct {
	Session string `json:"session"`
	Reason  string `json:"reason,omitempty"`
	Actor   string `json:"actor,omitempty"`
}

// CompactReply is the outcome of a compaction: the SessionCompacted's
// sequence and id, whether the session was compact already (nothing
// written), the replaced events (sequences, count, first and last write
// times) and how many messages this call purged.
type CompactReply struct {
	Session   string    `json:"session"`
	Seq       uint64    `json:"seq"`
	EventID   string    `json:"event_id"`
	Already   bool      `json:"already"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	Count     uint64    `json:"count"`
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
	Purged    uint64    `json:"purged"`
}

// Compaction describes a SessionCompacted: the events it replaced and who
// compacted them, when.
type Compaction struct {
	// Seq is the snapshot's own stream sequence: the session's history
	// starts there.
	Seq uint64 `json:"seq"`
	// FirstSeq and LastSeq bound the replaced events, Count counts them.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Count    uint64 `json:"count"`
	// FirstTime and LastTime are the write times of the first and the
	// last replaced event.
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
	// Channel and Actor compacted them at Time, for Reason.
	Channel string    `json:"channel"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason,omitempty"`
}
