package jetstream

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats-server/v2/server/avl"
)

// block verifies one block file record by record. It returns the first
// and last message sequences of its good records and the first damage.
func (c *checker) block(file, stream string, index uint32, strict bool, prevLast uint64) (first, last uint64, bad *StoreDamage, err error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("check store: %w", err)
	}
	defer f.Close()
	c.rep.Blocks++
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("check store: %w", err)
	}
	size := fi.Size()
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, index)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return 0, 0, nil, fmt.Errorf("check store: %w", err)
	}
	if c.rd == nil {
		c.rd = bufio.NewReaderSize(f, 1<<20)
	} else {
		c.rd.Reset(f)
	}
	le := binary.LittleEndian
	var off int64
	var hdr [recHdrSize]byte
	var sum [recHashSize]byte
	prev := prevLast
	fail := func(what string, args ...any) (uint64, uint64, *StoreDamage, error) {
		return first, last, &StoreDamage{Offset: off, Seq: last, What: fmt.Sprintf(what, args...)}, nil
	}
	torn := func(what string, args ...any) (uint64, uint64, *StoreDamage, error) {
		return first, last, &StoreDamage{Offset: off, Seq: last, torn: true, What: fmt.Sprintf(what, args...)}, nil
	}
	corrupt := func(what string, args ...any) (uint64, uint64, *StoreDamage, error) {
		return first, last, &StoreDamage{Offset: off, Seq: last, Corrupt: true, What: fmt.Sprintf(what, args...)}, nil
	}
	defer func() {
		c.rep.Bytes += off
		if c.progress != nil {
			c.progress(c.rep.Bytes, c.total)
		}
	}()
	for {
		n, rerr := io.ReadFull(c.rd, hdr[:])
		if rerr == io.EOF {
			return first, last, nil, nil
		}
		if rerr == io.ErrUnexpectedEOF {
			return torn("the block ends inside a record header (%d of %d bytes): cut short", n, recHdrSize)
		}
		if rerr != nil {
			return first, last, nil, fmt.Errorf("check store: read %s: %w", file, rerr)
		}
		rl := le.Uint32(hdr[0:])
		hasHdrs := rl&recHdrBit != 0
		rl &^= recHdrBit
		slen := int(le.Uint16(hdr[20:]))
		shlen := slen
		if hasHdrs {
			shlen += 4
		}
		dlen := int(rl) - recHdrSize
		if rl > recMaxLen || dlen < 0 || shlen > dlen-recHashSize {
			return corrupt("bad record framing (length %d, subject length %d)", rl, slen)
		}
		if off+int64(rl) > size {
			return torn("the block ends inside a record (%d of %d bytes): cut short", size-off, rl)
		}
		if cap(c.buf) < dlen {
			c.buf = make([]byte, dlen)
		}
		data := c.buf[:dlen]
		if n, rerr := io.ReadFull(c.rd, data); rerr != nil {
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				return torn("the block ends inside a record (%d of %d bytes): cut short", recHdrSize+n, rl)
			}
			return first, last, nil, fmt.Errorf("check store: read %s: %w", file, rerr)
		}
		if !recordSumOK(hh, hdr[:], data, slen, hasHdrs, &sum) {
			return corrupt("record checksum mismatch (flipped bits)")
		}
		seq := le.Uint64(hdr[4:])
		if seq&recTombBit == 0 {
			seq &^= recErasedBit
			switch {
			case seq == 0:
				// an erased placeholder
			case seq <= prev && prev > 0:
				return fail("sequence %d after %d: sequences go backwards", seq, prev)
			case seq > max(prev, c.idxLast)+maxSeqJump:
				// nats-server would fill a hole up to it in memory (#24 row 3).
				return corrupt("sequence %d is far beyond the stream's last (%d): garbage", seq, max(prev, c.idxLast))
			case strict && first > 0 && seq != prev+1:
				return fail("sequence %d after %d: %d sequences missing", seq, prev, seq-prev-1)
			default:
				if first == 0 {
					first = seq
				}
				last, prev = seq, seq
			}
		}
		c.rep.Records++
		off += int64(rl)
	}
}

// recordSumOK checks a record's HighwayHash as nats-server computes it.
func recordSumOK(hh hash.Hash64, hdr, data []byte, slen int, hasHdrs bool, sum *[recHashSize]byte) bool {
	hh.Reset()
	hh.Write(hdr[4:20])
	hh.Write(data[:slen])
	body := data[slen : len(data)-recHashSize]
	if hasHdrs {
		body = data[slen+4 : len(data)-recHashSize]
	}
	hh.Write(body)
	got := hh.Sum(sum[:0])
	return string(got) == string(data[len(data)-recHashSize:])
}

// readStreamState reads index.db: the blocks it lists with their first
// and last sequences, the last block and the stream's last sequence. ok
// is false when the file is missing or unreadable (nats-server then
// rebuilds the state from the blocks themselves).
func readStreamState(file, stream string) (blocks map[uint32]blockState, lastBlk uint32, lastSeq uint64, ok bool) {
	buf, err := os.ReadFile(file)
	if err != nil || len(buf) < 32 {
		return nil, 0, 0, false
	}
	key := sha256.Sum256([]byte(stream))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return nil, 0, 0, false
	}
	body, want := buf[:len(buf)-8], buf[len(buf)-8:]
	hh.Write(body)
	if string(hh.Sum(nil)) != string(want) || body[0] != stateMagic || body[1] < 1 || body[1] > stateMaxVer {
		return nil, 0, 0, false
	}
	version := body[1]
	r := &varints{b: body, at: 2}
	u, i := r.u, r.skipVarint
	u()           // msgs
	u()           // bytes
	u()           // first seq
	i()           // first time
	lastSeq = u() // last seq
	i()           // last time
	nsubj := u()
	for k := uint64(0); k < nsubj && r.ok(); k++ {
		l := u()
		if !r.skip(l) {
			return nil, 0, 0, false
		}
		total := u()
		u() // first block
		if total > 1 || version >= 4 {
			u() // last block
		}
	}
	nblk := u()
	if !r.ok() || nblk > uint64(len(body)) {
		return nil, 0, 0, false
	}
	blocks = make(map[uint32]blockState, nblk)
	for k := uint64(0); k < nblk && r.ok(); k++ {
		idx := uint32(u())
		u() // bytes
		first := u()
		i()
		last := u()
		i()
		ndel := u()
		if version >= 2 {
			u() // ttls
		}
		if version >= 3 {
			u() // schedules
		}
		if !r.ok() {
			return nil, 0, 0, false
		}
		if ndel > 0 {
			_, n, err := avl.Decode(r.rest())
			if err != nil || !r.skip(uint64(n)) {
				return nil, 0, 0, false
			}
		}
		blocks[idx] = blockState{first: first, last: last}
	}
	lastBlk = uint32(u())
	if !r.ok() {
		return nil, 0, 0, false
	}
	return blocks, lastBlk, lastSeq, true
}
