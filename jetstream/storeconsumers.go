package jetstream

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// consumers checks each consumer's state file (obs/<name>/o.dat) of a
// stream the way nats-server decodes it when it loads the consumer: a
// file it cannot decode leaves the consumer unloadable ("error creating
// store for consumer") for ever.
func (c *checker) consumers(dir, stream string) error {
	files, _ := filepath.Glob(filepath.Join(dir, "obs", "*", "o.dat"))
	sort.Strings(files)
	for _, f := range files {
		cdir := filepath.Dir(f)
		if _, err := os.Stat(filepath.Join(cdir, "meta.key")); err == nil {
			continue // encrypted: not ours to decode
		}
		buf, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("check store: %w", err)
		}
		if what := consumerStateProblem(buf); what != "" {
			c.damage(StoreDamage{Stream: stream, Consumer: filepath.Base(cdir), File: f, Offset: -1,
				What: "consumer state unreadable: " + what})
		}
	}
	return nil
}

// consumerStateProblem says why nats-server would refuse a consumer
// state file ("" when it decodes), following its decodeConsumerState.
func consumerStateProblem(buf []byte) string {
	if len(buf) == 0 {
		return ""
	}
	if len(buf) < 2 || buf[0] != consumerMagic {
		return "bad magic byte"
	}
	version := buf[1]
	if version != 1 && version != 2 {
		return fmt.Sprintf("unsupported version %d", version)
	}
	r := &varints{b: buf, at: 2}
	u, ts := r.u, r.skipVarint
	u()
	ackStream := u()
	u()
	delStream := u()
	if !r.ok() {
		return "truncated sequences"
	}
	const hbit = 1 << 63
	if ackStream&hbit != 0 || delStream&hbit != 0 {
		return "sequences out of range"
	}
	if np := u(); np > 0 {
		ts()
		for k := uint64(0); k < np; k++ {
			sseq := u()
			if version == 2 {
				u()
			}
			ts()
			if !r.ok() {
				return "truncated pending list"
			}
			if sseq+ackStream == 0 {
				return "zero pending sequence"
			}
		}
	}
	return ""
}

// varints reads the varint fields of nats-server's state files (index.db,
// a consumer's o.dat) from at on; a read past the end or a malformed
// varint breaks it for good (ok false), so a decoder checks once after a
// run of reads.
type varints struct {
	b  []byte
	at int // -1 once broken
}

func (r *varints) ok() bool { return r.at >= 0 }

// u reads an unsigned varint (0 once broken).
func (r *varints) u() uint64 {
	if r.at < 0 || r.at >= len(r.b) {
		r.at = -1
		return 0
	}
	v, n := binary.Uvarint(r.b[r.at:])
	if n <= 0 {
		r.at = -1
		return 0
	}
	r.at += n
	return v
}

// skipVarint passes over a signed varint (a time).
func (r *varints) skipVarint() {
	if r.at < 0 || r.at >= len(r.b) {
		r.at = -1
		return
	}
	_, n := binary.Varint(r.b[r.at:])
	if n <= 0 {
		r.at = -1
		return
	}
	r.at += n
}

// skip passes over n bytes, reporting whether they were there.
func (r *varints) skip(n uint64) bool {
	if r.at < 0 || n > uint64(len(r.b)-r.at) {
		r.at = -1
		return false
	}
	r.at += int(n)
	return true
}

// rest is what is left to read (nil once broken).
func (r *varints) rest() []byte {
	if r.at < 0 {
		return nil
	}
	return r.b[r.at:]
}
