package jetstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	// End is where intact records resume after a damaged span that
	// starts at Offset (the file's size when none does); 0 for a Gap.
	End int64
	// Subjects names the subjects of the damaged records whose bytes
	// still read as one (a subject names its session); a damaged record
	// whose subject is unreadable is named only by its sequences.
	Subjects []string
	// Count, when not 0, is how many of LostFrom..LostTo are gone (a
	// purge's range also spans other sessions' messages, which must be
	// there); 0: all of them.
	Count uint64
	// Corrupt is true when a record's bytes are wrong (checksum, framing
	// or sequence) and intact records may follow it: AcceptStoreDamage
	// drops the span from Offset to End and keeps the records after it.
	Corrupt bool
	// Gap is true when the damage is only a run of sequences missing
	// while the records around it are intact (inside a block, between
	// blocks, or where index.db says a block or the stream goes on): what
	// a purge leaves once the server has compacted its blocks. A run the
	// engine purged (an erase or a compaction, as the audit stream and
	// AcceptedLossFile record) is not reported; any other is damage
	// that nothing can cut away, and once accepted (AcceptStoreDamage)
	// it is no longer reported.
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
		fmt.Fprintf(&b, "; sequences %d..%d (%d messages) are in the damaged bytes", d.LostFrom, d.LostTo, d.LostTo-d.LostFrom+1)
	case d.LostTo > 0 && d.Count > 0:
		fmt.Fprintf(&b, ": %d messages of other sessions are gone from %d..%d", d.Count, d.LostFrom, d.LostTo)
	case d.LostTo > 0:
		fmt.Fprintf(&b, "; sequences %d..%d (%d messages) are gone", d.LostFrom, d.LostTo, d.LostTo-d.LostFrom+1)
	}
	if d.Corrupt && d.End > d.Offset {
		fmt.Fprintf(&b, " (bytes %d..%d)", d.Offset, d.End)
	}
	if len(d.Subjects) > 0 {
		fmt.Fprintf(&b, "; subjects %s", strings.Join(d.Subjects, ", "))
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
// from 1: nothing may delete or age messages out (the engine's event
// stream). Purge is allowed for erases and compactions only: the audit
// stream records each purged range, so its gaps are not damage.
func (m streamMeta) appendOnly() bool {
	return m.DenyDelete && m.MaxMsgs <= 0 && m.MaxBytes <= 0 && m.MaxAge == 0 && m.MaxPerSubj <= 0
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
// the damage it finds: record framing, each
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
	expected := newPurgeRuns(append(accepted, c.purged...))
	var kept []StoreDamage
	for _, d := range rep.Damage {
		if !d.Gap {
			kept = append(kept, d)
			continue
		}
		// Only the part of a missing run that no purge and no accepted
		// loss explains is damage.
		for _, run := range expected.uncovered(d.Stream, d.LostFrom, d.LostTo) {
			u := d
			u.LostFrom, u.LostTo = run.First, run.Last
			kept = append(kept, u)
		}
	}
	for stream, seqs := range c.tombs {
		expected.tombstoned(stream, seqs)
	}
	rep.Damage = append(kept, expected.overdrawn(c.msgDirs)...)
	return rep, nil
}

// maxSeqJump bounds how far a record's sequence may be beyond the one
// before it (or index.db's last): no stream takes 2^32 messages between
// two records of a block, and a larger jump makes nats-server allocate up
// to it.
const maxSeqJump = 1 << 32

type checker struct {
	ctx      context.Context
	purged   []AcceptedLoss      // the ranges the audit stream's records name
	tombs    map[string][]uint64 // stream -> the sequences its tombstone records name
	msgDirs  map[string]string   // stream -> its msgs/index.db
	idxLast  uint64              // the stream's last sequence in index.db (0: unknown)
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
	if c.msgDirs == nil {
		c.msgDirs = map[string]string{}
	}
	c.msgDirs[name] = filepath.Join(mdir, "index.db")
	index, lastBlk, lastSeq, idxOK := readStreamState(filepath.Join(mdir, "index.db"), name)
	c.idxLast = lastSeq

	blocks, err := blockIndexes(mdir)
	if err != nil {
		return err
	}
	if idxOK && strict {
		c.missingBlocks(name, mdir, index, blocks)
	}
	if !idxOK {
		index = nil // what index.db says counts only when it was read whole
	}
	prevLast, err := c.streamBlocks(name, mdir, blocks, index, strict)
	if err != nil {
		return err
	}
	// The stream's end: index.db's last block and sequence against what
	// the blocks hold (the last block deleted or cut on a record boundary).
	reported := prevLast // the last sequence the blocks or the damage found account for
	for _, d := range c.rep.Damage[before:] {
		reported = max(reported, d.LostTo)
	}
	if idxOK && strict && lastSeq > reported {
		file := filepath.Join(mdir, fmt.Sprintf("%d.blk", lastBlk))
		c.damage(StoreDamage{Stream: name, File: file, Offset: -1, Seq: prevLast, LostFrom: reported + 1, LostTo: lastSeq, Gap: true,
			What: fmt.Sprintf("the blocks end at sequence %d, index.db says the stream's last sequence is %d", prevLast, lastSeq)})
	}
	return c.consumers(dir, name)
}

// missingBlocks reports the blocks index.db lists that are not on disk,
// in block order.
func (c *checker) missingBlocks(name, mdir string, index map[uint32]blockState, blocks []uint32) {
	onDisk := make(map[uint32]bool, len(blocks))
	for _, n := range blocks {
		onDisk[n] = true
	}
	var listed []uint32
	for n := range index {
		listed = append(listed, n)
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i] < listed[j] })
	for _, n := range listed {
		bs := index[n]
		if !onDisk[n] && bs.last >= bs.first && bs.first > 0 {
			c.damage(StoreDamage{Stream: name, File: filepath.Join(mdir, fmt.Sprintf("%d.blk", n)), Offset: -1, Gap: true,
				LostFrom: bs.first, LostTo: bs.last, What: "the block is missing (index.db lists it)"})
		}
	}
}

// prevBlock is what the check of a stream's blocks keeps of the last
// block that held a record.
type prevBlock struct {
	last uint64 // its last sequence (0: no block before)
	file string
	bad  bool // the block checked last was damaged: the gap after it is its loss
}

// streamBlocks checks a stream's blocks in order and reports each one's
// damage with what its place in the stream says; index is what index.db
// says of the blocks (nil: unread). It returns the last sequence the
// blocks hold.
func (c *checker) streamBlocks(name, mdir string, blocks []uint32, index map[uint32]blockState, strict bool) (uint64, error) {
	var prev prevBlock
	audit := strings.HasSuffix(name, "_AUDIT")
	for _, n := range blocks {
		if err := c.ctx.Err(); err != nil {
			return 0, fmt.Errorf("check store: %w", err)
		}
		file := filepath.Join(mdir, fmt.Sprintf("%d.blk", n))
		scan, err := c.block(file, name, n, strict, audit, prev.last)
		if err != nil {
			return 0, err
		}
		ds := scan.damage
		if strict {
			ds = placeDamage(scan, prev, index, n)
		}
		if k := len(ds) - 1; k >= 0 && ds[k].torn && ds[k].LostTo == 0 && n == blocks[len(blocks)-1] {
			// The stream's tail record, cut by an interrupted write that
			// no index counts: never acknowledged (the stream-end check
			// still compares with index.db).
			d := ds[k]
			c.rep.TornTails = append(c.rep.TornTails, fmt.Sprintf("%s at offset %d (after sequence %d): %s", file, d.Offset, d.Seq, d.What))
			ds = ds[:k]
		}
		prev.bad = scan.bad()
		for _, d := range ds {
			d.Stream, d.File = name, file
			c.damage(d)
		}
		if scan.last > 0 {
			prev.last, prev.file = scan.last, file
		}
	}
	return prev.last, nil
}

// placeDamage is the damage of block n of an append-only stream: what its
// place in the stream says (a gap after the block before, a first block
// that does not start at 1, fewer sequences than index.db says it holds)
// around what its scan found.
func placeDamage(scan blockScan, prev prevBlock, index map[uint32]blockState, n uint32) []StoreDamage {
	first, last := scan.first, scan.last
	var lead []StoreDamage
	bs, listed := index[n]
	if first > 0 && prev.last > 0 && first != prev.last+1 && !prev.bad {
		lead = append(lead, StoreDamage{Offset: 0, Seq: prev.last, LostFrom: prev.last + 1, LostTo: first - 1, Gap: true,
			What: fmt.Sprintf("the block starts at sequence %d, the block before (%s) ends at %d", first, filepath.Base(prev.file), prev.last)})
	}
	if first > 1 && prev.last == 0 && (index == nil || !listed || bs.first <= 1) {
		lead = append(lead, StoreDamage{Offset: 0, LostFrom: 1, LostTo: first - 1, Gap: true,
			What: fmt.Sprintf("the stream's first block starts at sequence %d, not 1", first)})
	}
	ds := append(lead, scan.damage...)
	if listed && bs.last >= bs.first && bs.first > 0 && last < bs.last {
		if k := len(ds) - 1; k >= 0 && !ds[k].Gap && ds[k].End >= scan.size {
			// The damage runs to the block's end: what index.db says
			// the block held after it is in the damaged bytes.
			ds[k].LostFrom, ds[k].LostTo = max(last+1, bs.first), bs.last
		} else {
			ds = append(ds, StoreDamage{Offset: scan.size, Seq: last, Gap: true, LostFrom: max(last+1, bs.first), LostTo: bs.last,
				What: fmt.Sprintf("the block ends at sequence %d, index.db says it holds up to %d (cut short?)", last, bs.last)})
		}
	}
	return ds
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
