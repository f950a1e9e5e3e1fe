package jetstream

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats-server/v2/server/avl"
)

// blockScan is what block found in one block file.
type blockScan struct {
	// first and last are the sequences of the block's first and last
	// good records (0: none).
	first, last uint64
	// size is the file's size.
	size int64
	// damage lists every damaged place of the block, in file order.
	damage []StoreDamage
}

// bad reports whether the block holds damage other than missing runs of
// sequences (a record that cannot be read, or a torn end).
func (b blockScan) bad() bool {
	for _, d := range b.damage {
		if !d.Gap {
			return true
		}
	}
	return false
}

// blockReader reads one block file record by record.
type blockReader struct {
	c      *checker
	f      *os.File
	file   string
	size   int64
	hh     hash.Hash64
	off    int64 // where the next record starts
	hdr    [recHdrSize]byte
	sum    [recHashSize]byte
	strict bool
	audit  bool // the block is the audit stream's: its records name purged ranges
}

// block verifies one block file record by record. A record whose bytes
// are wrong (checksum or framing) does not end the scan: the reader looks
// for the next intact record after it (each record carries its own
// checksum, keyed by the block, so an intact one is recognized wherever it
// starts), so that the damage is bounded to the bytes that are wrong and
// the records after them are kept. A run of sequences missing between
// intact records is a Gap: a purge the server has compacted away, or
// records lost whole; the caller tells the two apart by the ranges the
// engine purged.
func (c *checker) block(file, stream string, index uint32, strict, audit bool, prevLast uint64) (blockScan, error) {
	var scan blockScan
	f, err := os.Open(file)
	if err != nil {
		return scan, fmt.Errorf("check store: %w", err)
	}
	defer f.Close()
	c.rep.Blocks++
	fi, err := f.Stat()
	if err != nil {
		return scan, fmt.Errorf("check store: %w", err)
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, index)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return scan, fmt.Errorf("check store: %w", err)
	}
	if c.rd == nil {
		c.rd = bufio.NewReaderSize(f, 1<<20)
	} else {
		c.rd.Reset(f)
	}
	scan.size = fi.Size()
	r := &blockReader{c: c, f: f, file: file, size: fi.Size(), hh: hh, strict: strict, audit: audit}
	defer func() {
		c.rep.Bytes += r.off
		if c.progress != nil {
			c.progress(c.rep.Bytes, c.total)
		}
	}()
	prev := prevLast
	for {
		rec, what, err := r.next()
		if err != nil {
			return scan, err
		}
		switch {
		case what == "" && rec.end:
			return scan, nil
		case what != "":
			// A bad record: find where intact records resume.
			from := r.off
			resume, rs, err := r.resync(from+1, prev)
			if err != nil {
				return scan, err
			}
			d := StoreDamage{Offset: from, End: resume, Seq: scan.last, Corrupt: true, What: what}
			if rec.subject != "" {
				d.Subjects = []string{rec.subject}
			}
			if resume < 0 {
				d.End = r.size
				if rec.torn {
					// The block ends inside a record.
					d.Corrupt, d.torn = false, true
				}
				scan.damage = append(scan.damage, d)
				r.off = r.size
				return scan, nil
			}
			if strict && rs > prev+1 && prev > 0 {
				d.LostFrom, d.LostTo = prev+1, rs-1
				prev = rs - 1 // the span accounts for them: no gap after it
			}
			scan.damage = append(scan.damage, d)
			if err := r.seek(resume); err != nil {
				return scan, err
			}
			continue
		}
		c.rep.Records++
		seq := rec.seq
		switch {
		case rec.tomb:
			if strict {
				if c.tombs == nil {
					c.tombs = map[string][]uint64{}
				}
				c.tombs[stream] = append(c.tombs[stream], seq)
			}
		case seq == 0:
			// an erased placeholder
		case seq <= prev && prev > 0:
			scan.damage = append(scan.damage, StoreDamage{Offset: rec.at, End: r.off, Seq: scan.last, Corrupt: true, Subjects: subjects(rec.subject),
				What: fmt.Sprintf("sequence %d after %d: sequences go backwards", seq, prev)})
		case seq > max(prev, c.idxLast)+maxSeqJump:
			// nats-server would fill a hole up to it in memory.
			scan.damage = append(scan.damage, StoreDamage{Offset: rec.at, End: r.off, Seq: scan.last, Corrupt: true, Subjects: subjects(rec.subject),
				What: fmt.Sprintf("sequence %d is far beyond the stream's last (%d): garbage", seq, max(prev, c.idxLast))})
		default:
			if strict && scan.first > 0 && seq != prev+1 {
				scan.damage = append(scan.damage, StoreDamage{Offset: rec.at, Seq: prev, Gap: true, LostFrom: prev + 1, LostTo: seq - 1,
					What: fmt.Sprintf("sequence %d after %d: %d sequences missing", seq, prev, seq-prev-1)})
			}
			if scan.first == 0 {
				scan.first = seq
			}
			scan.last, prev = seq, seq
			if r.audit {
				c.auditRecord(rec.body)
			}
		}
	}
}

func subjects(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// record is one record read by blockReader.next.
type record struct {
	at      int64 // its offset
	seq     uint64
	tomb    bool
	subject string // "" when unreadable
	body    []byte // the message body (valid until the next read)
	end     bool   // the block's end: no record
	torn    bool   // the block ends inside this record
}

// next reads the record at r.off. what is "" for an intact record (or the
// block's end), else why the record is bad; r.off is then left at the bad
// record's start.
func (r *blockReader) next() (rec record, what string, err error) {
	rec.at = r.off
	c, le := r.c, binary.LittleEndian
	n, rerr := io.ReadFull(c.rd, r.hdr[:])
	if rerr == io.EOF {
		rec.end = true
		return rec, "", nil
	}
	if rerr == io.ErrUnexpectedEOF {
		rec.torn = true
		return rec, fmt.Sprintf("the block ends inside a record header (%d of %d bytes): cut short", n, recHdrSize), nil
	}
	if rerr != nil {
		return rec, "", fmt.Errorf("check store: read %s: %w", r.file, rerr)
	}
	rl, slen, hasHdrs, ok := framing(r.hdr[:])
	if !ok {
		return rec, fmt.Sprintf("bad record framing (length %d, subject length %d)", rl, slen), nil
	}
	if r.off+int64(rl) > r.size {
		rec.torn = true
		return rec, fmt.Sprintf("the block ends inside a record (%d of %d bytes): cut short", r.size-r.off, rl), nil
	}
	dlen := int(rl) - recHdrSize
	if cap(c.buf) < dlen {
		c.buf = make([]byte, dlen)
	}
	data := c.buf[:dlen]
	if n, rerr := io.ReadFull(c.rd, data); rerr != nil {
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			rec.torn = true
			return rec, fmt.Sprintf("the block ends inside a record (%d of %d bytes): cut short", recHdrSize+n, rl), nil
		}
		return rec, "", fmt.Errorf("check store: read %s: %w", r.file, rerr)
	}
	rec.subject = readableSubject(data[:slen])
	if !recordSumOK(r.hh, r.hdr[:], data, slen, hasHdrs, &r.sum) {
		return rec, "record checksum mismatch (flipped bits)", nil
	}
	seq := le.Uint64(r.hdr[4:])
	rec.tomb = seq&recTombBit != 0
	rec.seq = seq &^ recErasedBit &^ recTombBit
	rec.body = recordBody(data, slen, hasHdrs)
	r.off += int64(rl)
	return rec, "", nil
}

// framing decodes a record header's length fields and reports whether
// they can frame a record.
func framing(hdr []byte) (rl uint32, slen int, hasHdrs, ok bool) {
	rl = binary.LittleEndian.Uint32(hdr[0:])
	hasHdrs = rl&recHdrBit != 0
	rl &^= recHdrBit
	slen = int(binary.LittleEndian.Uint16(hdr[20:]))
	shlen := slen
	if hasHdrs {
		shlen += 4
	}
	dlen := int(rl) - recHdrSize
	return rl, slen, hasHdrs, rl <= recMaxLen && dlen >= 0 && shlen <= dlen-recHashSize
}

// recordBody is the message body of a record's data (subject, optional
// headers, body, checksum).
func recordBody(data []byte, slen int, hasHdrs bool) []byte {
	rest := data[slen : len(data)-recHashSize]
	if !hasHdrs {
		return rest
	}
	hlen := int(binary.LittleEndian.Uint32(rest))
	if hlen < 0 || 4+hlen > len(rest) {
		return nil
	}
	return rest[4+hlen:]
}

// readableSubject is b when it reads as a subject (printable UTF-8 with no
// spaces), else "".
func readableSubject(b []byte) string {
	if len(b) == 0 || len(b) > 1024 || !utf8.Valid(b) {
		return ""
	}
	s := string(b)
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == utf8.RuneError }) {
		return ""
	}
	return s
}

// seek moves the reader to offset off of the block.
func (r *blockReader) seek(off int64) error {
	if _, err := r.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("check store: seek %s: %w", r.file, err)
	}
	r.c.rd.Reset(r.f)
	r.off = off
	return nil
}

// resyncWindow is how many bytes resync reads at a time.
const resyncWindow = 1 << 20

// resync looks for the first intact record at or after offset from: a
// header whose framing fits in the block, whose sequence is after prev
// (and not garbage), and whose checksum is right. It returns its offset
// and sequence, or -1 when no intact record follows. The search reads the
// block in windows, so memory stays below a window and one record.
func (r *blockReader) resync(from int64, prev uint64) (int64, uint64, error) {
	win := make([]byte, resyncWindow+recHdrSize)
	le := binary.LittleEndian
	for base := from; base+recHdrSize <= r.size; base += resyncWindow {
		if err := r.c.ctx.Err(); err != nil {
			return -1, 0, fmt.Errorf("check store: %w", err)
		}
		n, err := r.f.ReadAt(win, base)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, 0, fmt.Errorf("check store: read %s: %w", r.file, err)
		}
		for i := 0; i+recHdrSize <= n && i < resyncWindow; i++ {
			hdr := win[i : i+recHdrSize]
			rl, slen, hasHdrs, ok := framing(hdr)
			at := base + int64(i)
			if !ok || int64(rl) < recHdrSize+recHashSize || at+int64(rl) > r.size {
				continue
			}
			seq := le.Uint64(hdr[4:])
			tomb := seq&recTombBit != 0
			seq &^= recErasedBit | recTombBit
			if !tomb && seq != 0 && (seq <= prev || seq > max(prev, r.c.idxLast)+maxSeqJump) {
				continue
			}
			data := make([]byte, int(rl)-recHdrSize)
			if _, err := r.f.ReadAt(data, at+recHdrSize); err != nil {
				continue
			}
			if recordSumOK(r.hh, hdr, data, slen, hasHdrs, &r.sum) {
				if tomb {
					seq = prev + 1
				}
				return at, seq, nil
			}
		}
	}
	return -1, 0, nil
}

// auditRecord notes the purged range an audit stream's record names (the
// range record of an erase or a compaction; the other steps repeat it or
// name none).
func (c *checker) auditRecord(body []byte) {
	var rec AuditRecord
	if json.Unmarshal(body, &rec) != nil || rec.Phase != "" || rec.Stream == "" || rec.FirstSeq == 0 || rec.LastSeq < rec.FirstSeq {
		return
	}
	c.purged = append(c.purged, AcceptedLoss{Stream: rec.Stream, From: rec.FirstSeq, To: rec.LastSeq, Count: max(rec.Purged, 1),
		What: fmt.Sprintf("%s of %s", rec.Kind, rec.Session)})
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
