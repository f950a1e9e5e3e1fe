package jetstream

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats-server/v2/server/avl"
)

// The file store's on-disk layout, as nats-server v2.15 writes it
// (server/filestore.go). A message block <n>.blk is a run of records:
//
//	rl(4) seq(8) ts(8) slen(2) subject [hlen(4) headers] body checksum(8)
//
// rl is the whole record's length, its high bit set when the record has
// headers; seq carries the erased (ebit) or tombstone (tbit) flag; the
// checksum is a 64-bit HighwayHash of seq, ts, slen, subject, headers and
// body, keyed with sha256("<stream>-<n>"). index.db is a snapshot of the
// stream's state (per block: first and last sequence), checksummed with a
// HighwayHash keyed with sha256("<stream>").
const (
	recHdrSize    = 22
	recHashSize   = 8
	recHdrBit     = 1 << 31
	recErasedBit  = 1 << 63
	recTombBit    = 1 << 62
	recMaxLen     = 32 * 1024 * 1024 // nats-server's rlBadThresh
	stateMagic    = 11
	stateMaxVer   = 4
	consumerMagic = 22
)

// ErrStoreDamaged is matched (errors.Is) by StoreReport.Err when a
// stopped store's files are damaged: a block cut short, missing, with a
// record whose checksum, framing or sequence is wrong, or a consumer's
// state file that nats-server cannot read.
var ErrStoreDamaged = errors.New("store damaged")

// StoreDamage is one damaged place of a stopped store.
type StoreDamage struct {
	// Stream is the stream whose files are damaged.
	Stream string
	// File is the damaged (or missing) file.
	File string
	// Offset is the byte offset of the first bad record in File, -1 when
	// the damage is not at a place in the file (a missing file).
	Offset int64
	// Seq is the last good sequence before the damage (0: none).
	Seq uint64
	// Lost is the range of sequences the index says the file held and
	// the file no longer has (0, 0 when unknown).
	LostFrom, LostTo uint64
	// What says what is wrong.
	What string
	// Consumer names the consumer whose state file is damaged ("" for
	// message blocks).
	Consumer string
	// Corrupt is true when a record's bytes are wrong (checksum or
	// framing) but the block goes on: the records after it may be intact,
	// and cutting the block there (AcceptStoreDamage) loses them.
	Corrupt bool
	// Gap is true when the damage is only a run of sequences missing
	// between intact blocks (or before the first): once accepted
	// (AcceptStoreDamage) it is no longer reported.
	Gap bool

	torn bool // the block ends inside a record
}

func (d StoreDamage) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", d.Offset)
	}
	if d.Seq > 0 {
		fmt.Fprintf(&b, " (after sequence %d)", d.Seq)
	}
	b.WriteString(": ")
	b.WriteString(d.What)
	switch {
	case d.LostTo > 0 && d.Corrupt:
		fmt.Fprintf(&b, "; sequences %d..%d (%d messages) are in or after the bad record, to the block's end", d.LostFrom, d.LostTo, d.LostTo-d.LostFrom+1)
	case d.LostTo > 0:
		fmt.Fprintf(&b, "; sequences %d..%d (%d messages) are gone", d.LostFrom, d.LostTo, d.LostTo-d.LostFrom+1)
	}
	return b.String()
}

// StoreReport is what CheckStore found.
type StoreReport struct {
	Streams, Blocks int
	Bytes           int64  // block bytes read
	Records         uint64 // records verified
	// Damage lists every damaged place, blocks first.
	Damage []StoreDamage
	// TornTails names the streams' last blocks that end inside a record
	// no index claims: a write interrupted (a crash, a full disk) before
	// it was acknowledged. nats-server drops such a record when it loads
	// the block; it is not damage.
	TornTails []string
	// Unverified names the streams whose blocks could not be verified
	// (encrypted or compressed) and why.
	Unverified []string
}

// Err is nil when no damage was found, else an error matching
// ErrStoreDamaged that names every damaged place (up to ten).
func (r StoreReport) Err() error {
	if len(r.Damage) == 0 {
		return nil
	}
	var lines []string
	for i, d := range r.Damage {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("and %d more", len(r.Damage)-10))
			break
		}
		lines = append(lines, d.String())
	}
	return fmt.Errorf("%w: %s", ErrStoreDamaged, strings.Join(lines, "; "))
}

// StoreCheckConfig configures CheckStore. The zero value is usable.
type StoreCheckConfig struct {
	// Progress, when set, is called after each block with the block bytes
	// read so far and the total to read.
	Progress func(done, total int64)
}

// streamMeta is the part of a stream's meta.inf the check needs.
type streamMeta struct {
	Name        string `json:"name"`
	DenyDelete  bool   `json:"deny_delete"`
	DenyPurge   bool   `json:"deny_purge"`
	Compression string `json:"compression"`
	MaxMsgs     int64  `json:"max_msgs"`
	MaxBytes    int64  `json:"max_bytes"`
	MaxAge      int64  `json:"max_age"`
	MaxPerSubj  int64  `json:"max_msgs_per_subject"`
}

// appendOnly reports whether the stream's sequences must be contiguous
// from 1: nothing may delete, purge or age messages out (the engine's
// event stream).
func (m streamMeta) appendOnly() bool {
	return m.DenyDelete && m.DenyPurge && m.MaxMsgs <= 0 && m.MaxBytes <= 0 && m.MaxAge == 0 && m.MaxPerSubj <= 0
}

// StreamDirs lists the stream directories of the embedded server's store
// in dataDir (<dataDir>/jetstream/<account>/streams/<stream>).
func StreamDirs(dataDir string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(dataDir, "jetstream", "*", "streams", "*"))
	if err != nil {
		return nil, fmt.Errorf("list streams in %s: %w", dataDir, err)
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out, nil
}

// CheckStore reads every message block of every stream of the stopped
// embedded store in dataDir, and every consumer's state file, and reports
// the damage it finds (issue 24 rows 2 and 3): record framing, each
// record's checksum, sequences that go backwards, and, for append-only
// streams (deny delete and purge, no limits: the event stream), gaps in
// the sequences and sequences that index.db says a block holds but the
// block no longer has (a block cut short or deleted while index.db
// survived). It never trusts index.db: the blocks are the evidence, the
// index only says what they should hold.
//
// It reads one record at a time: memory stays below a record's largest
// size (32 MiB) whatever the files hold, and time is linear in the store's
// size. The store must not be in use (take its DataLock first). The error
// is for I/O failures; damage is in the report (see StoreReport.Err).
func CheckStore(ctx context.Context, dataDir string, cfg StoreCheckConfig) (StoreReport, error) {
	var rep StoreReport
	dirs, err := StreamDirs(dataDir)
	if err != nil {
		return rep, err
	}
	var total int64
	for _, d := range dirs {
		blks, _ := filepath.Glob(filepath.Join(d, "msgs", "*.blk"))
		for _, b := range blks {
			if fi, err := os.Stat(b); err == nil {
				total += fi.Size()
			}
		}
	}
	accepted, err := readAcceptedLoss(dataDir)
	if err != nil {
		return rep, err
	}
	c := &checker{ctx: ctx, rep: &rep, total: total, progress: cfg.Progress, buf: make([]byte, 64*1024)}
	for _, d := range dirs {
		if err := c.stream(d); err != nil {
			return rep, err
		}
	}
	kept := rep.Damage[:0]
	for _, d := range rep.Damage {
		if !d.Gap || !accepted.covers(d) {
			kept = append(kept, d)
		}
	}
	rep.Damage = kept
	return rep, nil
}

// maxSeqJump bounds how far a record's sequence may be beyond the one
// before it (or index.db's last): no stream takes 2^32 messages between
// two records of a block, and a larger jump makes nats-server allocate up
// to it.
const maxSeqJump = 1 << 32

type checker struct {
	ctx      context.Context
	idxLast  uint64 // the stream's last sequence in index.db (0: unknown)
	rep      *StoreReport
	total    int64
	progress func(done, total int64)
	buf      []byte
	rd       *bufio.Reader
}

func (c *checker) damage(d StoreDamage) { c.rep.Damage = append(c.rep.Damage, d) }

// blockState is what index.db says of one block.
type blockState struct {
	first, last uint64
}

// stream checks one stream directory.
func (c *checker) stream(dir string) error {
	c.rep.Streams++
	name := filepath.Base(dir)
	var meta streamMeta
	if data, err := os.ReadFile(filepath.Join(dir, "meta.inf")); err == nil {
		if json.Unmarshal(data, &meta) == nil && meta.Name != "" {
			name = meta.Name
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.key")); err == nil {
		c.rep.Unverified = append(c.rep.Unverified, name+" (encrypted)")
		return c.consumers(dir, name)
	}
	if meta.Compression != "" && meta.Compression != "none" {
		c.rep.Unverified = append(c.rep.Unverified, name+" (compressed)")
		return c.consumers(dir, name)
	}
	strict := meta.appendOnly()
	before := len(c.rep.Damage)
	mdir := filepath.Join(dir, "msgs")
	index, lastBlk, lastSeq, idxOK := readStreamState(filepath.Join(mdir, "index.db"), name)
	c.idxLast = lastSeq

	blocks, err := blockIndexes(mdir)
	if err != nil {
		return err
	}
	onDisk := make(map[uint32]bool, len(blocks))
	for _, n := range blocks {
		onDisk[n] = true
	}
	// Blocks index.db lists that are gone.
	if idxOK && strict {
		var listed []uint32
		for n := range index {
			listed = append(listed, n)
		}
		sort.Slice(listed, func(i, j int) bool { return listed[i] < listed[j] })
		for _, n := range listed {
			bs := index[n]
			if !onDisk[n] && bs.last >= bs.first && bs.first > 0 {
				c.damage(StoreDamage{Stream: name, File: filepath.Join(mdir, fmt.Sprintf("%d.blk", n)), Offset: -1,
					LostFrom: bs.first, LostTo: bs.last, What: "the block is missing (index.db lists it)"})
			}
		}
	}
	var prevLast uint64 // last sequence of the blocks before
	var prevFile string
	var prevBad bool // the block before was damaged: the gap after it is its loss
	for _, n := range blocks {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("check store: %w", err)
		}
		file := filepath.Join(mdir, fmt.Sprintf("%d.blk", n))
		first, last, bad, err := c.block(file, name, n, strict, prevLast)
		if err != nil {
			return err
		}
		bs, listed := index[n]
		if bad == nil && strict && first > 0 && prevLast > 0 && first != prevLast+1 && !prevBad {
			bad = &StoreDamage{Offset: 0, Seq: prevLast, LostFrom: prevLast + 1, LostTo: first - 1, Gap: true,
				What: fmt.Sprintf("the block starts at sequence %d, the block before (%s) ends at %d", first, filepath.Base(prevFile), prevLast)}
		}
		if bad == nil && strict && first > 1 && prevLast == 0 && (!idxOK || !listed || bs.first <= 1) {
			bad = &StoreDamage{Offset: 0, LostFrom: 1, LostTo: first - 1, Gap: true,
				What: fmt.Sprintf("the stream's first block starts at sequence %d, not 1 (nothing may delete or purge this stream)", first)}
		}
		if idxOK && strict && listed && bs.last >= bs.first && bs.first > 0 {
			got := last
			if bad != nil && !bad.Gap {
				got = bad.Seq
			}
			if got < bs.last {
				if bad == nil {
					size := int64(-1)
					if fi, err := os.Stat(file); err == nil {
						size = fi.Size()
					}
					bad = &StoreDamage{Offset: size, Seq: got, What: fmt.Sprintf("the block ends at sequence %d, index.db says it holds up to %d (cut short?)", got, bs.last)}
				}
				bad.LostFrom, bad.LostTo = max(got+1, bs.first), bs.last
			}
		}
		if bad != nil && bad.torn && bad.LostTo == 0 && n == blocks[len(blocks)-1] {
			// The stream's tail record, cut by an interrupted write that
			// no index counts: never acknowledged (the stream-end check
			// below still compares with index.db).
			c.rep.TornTails = append(c.rep.TornTails, fmt.Sprintf("%s at offset %d (after sequence %d): %s", file, bad.Offset, bad.Seq, bad.What))
			bad = nil
		}
		prevBad = bad != nil && !bad.Gap
		if bad != nil {
			bad.Stream, bad.File = name, file
			c.damage(*bad)
		}
		if last > 0 {
			prevLast, prevFile = last, file
		}
	}
	// The stream's end: index.db's last block and sequence against what
	// the blocks hold (the last block deleted or cut on a record boundary).
	if idxOK && strict && lastSeq > prevLast && len(c.rep.Damage) == before {
		file := filepath.Join(mdir, fmt.Sprintf("%d.blk", lastBlk))
		c.damage(StoreDamage{Stream: name, File: file, Offset: -1, Seq: prevLast, LostFrom: prevLast + 1, LostTo: lastSeq,
			What: fmt.Sprintf("the blocks end at sequence %d, index.db says the stream's last sequence is %d", prevLast, lastSeq)})
	}
	return c.consumers(dir, name)
}

// blockIndexes lists the <n>.blk files of a msgs directory, sorted.
func blockIndexes(mdir string) ([]uint32, error) {
	ents, err := os.ReadDir(mdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list blocks in %s: %w", mdir, err)
	}
	var out []uint32
	for _, e := range ents {
		s, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			continue
		}
		out = append(out, uint32(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

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

// consumers checks each consumer's state file (obs/<name>/o.dat) of a
// stream the way nats-server decodes it when it loads the consumer: a
// file it cannot decode leaves the consumer unloadable ("error creating
// store for consumer") for ever (issue 24 row 12(c)).
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
