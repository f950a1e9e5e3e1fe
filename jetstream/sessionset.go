package jetstream

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
)

// SessionSet is the set of sessions a migration left on the store's one
// event stream: every session with an event there when the store was
// migrated to partitions. It is fixed by the migration, so every engine,
// every replay and every command reaches the same verdict on where a
// session lives. It holds an 8-byte hash of each session id: a session
// created after the migration whose hash equals an earlier one's (about
// one pair in 10^5 at ten million sessions each side) lives on the one
// stream too, on every engine alike.
type SessionSet struct {
	hashes []uint64 // sorted, no duplicates
}

// NewSessionSet returns the set of sessions.
func NewSessionSet(sessions []string) *SessionSet {
	h := make([]uint64, len(sessions))
	for i, s := range sessions {
		h[i] = sessionHash(s)
	}
	slices.Sort(h)
	return &SessionSet{hashes: slices.Compact(h)}
}

// Has reports whether session is in the set. A nil set holds nothing.
func (s *SessionSet) Has(session string) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearch(s.hashes, sessionHash(session))
	return ok
}

// Len is the number of distinct hashes in the set.
func (s *SessionSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.hashes)
}

// sessionHash is the 64-bit FNV-1a hash of a session id.
func sessionHash(session string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(session))
	return h.Sum64()
}

// marshal encodes the set as its sorted hashes, 8 bytes each, big-endian.
func (s *SessionSet) marshal() []byte {
	out := make([]byte, 8*len(s.hashes))
	for i, h := range s.hashes {
		binary.BigEndian.PutUint64(out[8*i:], h)
	}
	return out
}

// digest is the hex SHA-256 of the set's stored form.
func (s *SessionSet) digest() string {
	sum := sha256.Sum256(s.marshal())
	return hex.EncodeToString(sum[:])
}

// unmarshalSessionSet decodes what marshal wrote, refusing anything else.
func unmarshalSessionSet(data []byte) (*SessionSet, error) {
	if len(data)%8 != 0 {
		return nil, fmt.Errorf("session set of %d bytes: not a multiple of 8", len(data))
	}
	h := make([]uint64, len(data)/8)
	for i := range h {
		h[i] = binary.BigEndian.Uint64(data[8*i:])
		if i > 0 && h[i] <= h[i-1] {
			return nil, fmt.Errorf("session set: hash %d is not above the one before it", i)
		}
	}
	return &SessionSet{hashes: h}, nil
}
