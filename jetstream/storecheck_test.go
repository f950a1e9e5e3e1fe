package jetstream_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/highwayhash"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// storeWithBlocks writes msgs messages of about 60 KB on the event
// stream (OpenLog's configuration: append-only) of a fresh embedded
// server, with a durable consumer, stops the server and returns its data
// directory and the stream's msgs directory. 8 MiB blocks: 300 messages
// make three.
func storeWithBlocks(t *testing.T, msgs int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("x", 60_000))
	for i := range msgs {
		if _, err := js.Publish(ctx, fmt.Sprintf("tools.events.s%d", i%20), body); err != nil {
			t.Fatal(err)
		}
	}
	f, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "views"})
	if err != nil {
		t.Fatal(err)
	}
	f.Stop()
	nc.Close()
	srv.Shutdown()
	mdir := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "msgs")
	blks, _ := filepath.Glob(filepath.Join(mdir, "*.blk"))
	if len(blks) < 3 {
		t.Fatalf("%d blocks, want 3 or more", len(blks))
	}
	if _, err := os.Stat(filepath.Join(mdir, "index.db")); err != nil {
		t.Fatalf("no index.db after a clean shutdown: %v", err)
	}
	return dir, mdir
}

// copyStore copies a stopped data directory.
func copyStore(t *testing.T, dir string) (string, string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst, filepath.Join(dst, "jetstream", "$G", "streams", "TOOLS_EVENTS", "msgs")
}

func mustDamage(t *testing.T, dir string, want ...string) jetstream.StoreReport {
	t.Helper()
	rep, err := jetstream.CheckStore(context.Background(), dir, jetstream.StoreCheckConfig{})
	if err != nil {
		t.Fatal(err)
	}
	derr := rep.Err()
	if !errors.Is(derr, jetstream.ErrStoreDamaged) {
		t.Fatalf("no damage found (%d blocks, %d records)", rep.Blocks, rep.Records)
	}
	for _, w := range want {
		if !strings.Contains(derr.Error(), w) {
			t.Fatalf("damage report %q does not say %q", derr, w)
		}
	}
	t.Logf("found: %v", derr)
	return rep
}

// Damage to a stopped store with index.db in place is
// found by reading the blocks: a block cut to half, a block deleted, one
// bit flipped in a message, 2 KB of bytes flipped mid-block, a garbage
// consumer state file; an intact store passes.
func TestCheckStoreFindsDamage(t *testing.T) {
	ctx := context.Background()
	orig, _ := storeWithBlocks(t, 300)
	var calls int
	var done, total int64
	start := time.Now()
	rep, err := jetstream.CheckStore(ctx, orig, jetstream.StoreCheckConfig{Progress: func(d, tot int64) { calls, done, total = calls+1, d, tot }})
	took := time.Since(start)
	if err != nil || rep.Err() != nil {
		t.Fatalf("intact store: %v, %v", err, rep.Err())
	}
	if rep.Records < 300 || rep.Blocks < 3 {
		t.Fatalf("intact store: %d records in %d blocks, want 300 in 3 or more", rep.Records, rep.Blocks)
	}
	// Progress after each block, ending at the whole store.
	if calls != rep.Blocks || done != total || total != rep.Bytes {
		t.Fatalf("progress: %d calls, last %d of %d; want %d calls ending at %d of %d", calls, done, total, rep.Blocks, rep.Bytes, rep.Bytes)
	}
	t.Logf("intact: %d streams, %d blocks, %d records, %d bytes checked in %v (%.0f MiB/s)", rep.Streams, rep.Blocks, rep.Records, rep.Bytes,
		took.Round(time.Millisecond), float64(rep.Bytes)/(1<<20)/took.Seconds())

	t.Run("block cut to half", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		blk := filepath.Join(mdir, "2.blk")
		fi, err := os.Stat(blk)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(blk, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		mustDamage(t, dir, "2.blk", "cut short", "are gone")
	})
	t.Run("last block cut on a record boundary", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		blks, _ := filepath.Glob(filepath.Join(mdir, "*.blk"))
		last := blks[len(blks)-1]
		offs := recordOffsets(t, last)
		if err := os.Truncate(last, offs[len(offs)-2]); err != nil {
			t.Fatal(err)
		}
		mustDamage(t, dir, filepath.Base(last), "index.db says")
	})
	t.Run("torn tail record is not damage", func(t *testing.T) {
		// A write interrupted before its acknowledgement (a crash, a full
		// disk) leaves part of a record at the stream's end that no index
		// counts: nats-server drops it at load, nothing acknowledged is
		// lost, so it must not stop a start.
		dir, mdir := copyStore(t, orig)
		blks, _ := filepath.Glob(filepath.Join(mdir, "*.blk"))
		last := blks[len(blks)-1]
		offs := recordOffsets(t, last)
		b, _ := os.ReadFile(last)
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		tail := b[offs[len(offs)-1]:][:100] // the head of a record like the last one
		if _, err := f.Write(tail); err != nil {
			t.Fatal(err)
		}
		f.Close()
		rep, err := jetstream.CheckStore(ctx, dir, jetstream.StoreCheckConfig{})
		if err != nil || rep.Err() != nil || len(rep.TornTails) != 1 {
			t.Fatalf("torn tail: %v, %v, torn tails %v", err, rep.Err(), rep.TornTails)
		}
		t.Logf("torn tail: %s", rep.TornTails[0])
		{
			// nats-server drops it at load: the next write lands whole.
			tdir, _ := copyStore(t, dir)
			srv := natstest.ServerAt(t, tdir)
			nc := natstest.Connect(t, srv.ClientURL())
			js, err := natsjs.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, "tools.events.after", []byte("after")); err != nil {
				t.Fatal(err)
			}
			nc.Close()
			srv.Shutdown()
			rep, err := jetstream.CheckStore(ctx, tdir, jetstream.StoreCheckConfig{})
			if err != nil || rep.Err() != nil || len(rep.TornTails) != 0 || rep.Records != 301 {
				t.Fatalf("after loading the torn tail and one publish: %v, %v, torn %v, %d records, want 301", err, rep.Err(), rep.TornTails, rep.Records)
			}
		}
		// And the last block cut to half is still damage: index.db counts
		// what it lost.
		if err := os.Truncate(last, int64(len(b)/2)); err != nil {
			t.Fatal(err)
		}
		mustDamage(t, dir, filepath.Base(last), "are gone")
	})
	t.Run("middle block deleted", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		if err := os.Remove(filepath.Join(mdir, "2.blk")); err != nil {
			t.Fatal(err)
		}
		mustDamage(t, dir, "2.blk", "missing")
	})
	t.Run("first block deleted, index.db gone too", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		_ = os.Remove(filepath.Join(mdir, "1.blk"))
		_ = os.Remove(filepath.Join(mdir, "index.db"))
		mustDamage(t, dir, "2.blk", "not 1")
	})
	t.Run("one bit flipped in a message", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		flip(t, filepath.Join(mdir, "1.blk"), 100_000, 1)
		rep := mustDamage(t, dir, "1.blk", "checksum mismatch")
		if d := rep.Damage[0]; d.Offset <= 0 || d.Offset > 100_000 {
			t.Fatalf("damage at offset %d, want the record holding byte 100000", d.Offset)
		}
	})
	t.Run("2 KB flipped mid-block", func(t *testing.T) {
		dir, mdir := copyStore(t, orig)
		flip(t, filepath.Join(mdir, "2.blk"), 4<<20, 2048)
		mustDamage(t, dir, "2.blk")
	})
	t.Run("garbage sequence with a valid checksum", func(t *testing.T) {
		// Not what a bad disk makes, but what would make nats-server fill
		// a hole up to it: a record of a stream that is not append-only
		// (a KV bucket) whose sequence jumps by 2^36, its checksum right.
		dir, _ := copyStore(t, orig)
		kv := filepath.Join(dir, "jetstream", "$G", "streams", "KV_GARBAGE", "msgs")
		if err := os.MkdirAll(kv, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(kv), "meta.inf"), []byte(`{"name":"KV_GARBAGE"}`), 0o640); err != nil {
			t.Fatal(err)
		}
		blk := append(signedRecord(t, "KV_GARBAGE", 1, 1), signedRecord(t, "KV_GARBAGE", 1, 2+1<<36)...)
		if err := os.WriteFile(filepath.Join(kv, "1.blk"), blk, 0o640); err != nil {
			t.Fatal(err)
		}
		mustDamage(t, dir, "KV_GARBAGE", "far beyond the stream's last")
	})
	t.Run("garbage consumer state", func(t *testing.T) {
		dir, _ := copyStore(t, orig)
		odat := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "obs", "views", "o.dat")
		if err := os.WriteFile(odat, []byte("garbage, not a consumer state"), 0o640); err != nil {
			t.Fatal(err)
		}
		rep := mustDamage(t, dir, "o.dat", "consumer state unreadable")
		if rep.Damage[0].Consumer != "views" {
			t.Fatalf("damage names consumer %q, want views", rep.Damage[0].Consumer)
		}
	})
}

// recordOffsets lists where each record of a block starts.
func recordOffsets(t *testing.T, file string) []int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := 0; off+22 <= len(b); {
		offs = append(offs, int64(off))
		off += int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
	}
	return offs
}

// flip xors n bytes of file from off with 0xff (n == 1: one bit).
func flip(t *testing.T, file string, off, n int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if off+n > len(b) {
		t.Fatalf("%s has %d bytes, want %d", file, len(b), off+n)
	}
	if n == 1 {
		b[off] ^= 0x10
	} else {
		for i := off; i < off+n; i++ {
			b[i] ^= 0xff
		}
	}
	if err := os.WriteFile(file, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// Accepting the damage makes the store loadable and clean for later
// checks while dropping only the damaged bytes: the bad block is rewritten
// without the damaged records and every record after them is kept (a copy
// of the block is kept aside, and the dropped records are named by their
// sequences and subjects), the stream's state is rebuilt from the blocks,
// the damaged consumer is moved aside, and the gap left is recorded as
// accepted.
func TestAcceptStoreDamageDropsOnlyTheDamagedRecords(t *testing.T) {
	ctx := context.Background()
	orig, _ := storeWithBlocks(t, 300)
	dir, mdir := copyStore(t, orig)
	flip(t, filepath.Join(mdir, "2.blk"), 4<<20, 2048)
	odat := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "obs", "views", "o.dat")
	if err := os.WriteFile(odat, []byte{0xde, 0xad}, 0o640); err != nil {
		t.Fatal(err)
	}
	rep := mustDamage(t, dir, "2.blk", "o.dat")
	ar, err := jetstream.AcceptStoreDamage(ctx, dir, rep, time.Now())
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ar.Aside, "TOOLS_EVENTS", "2.blk")); err != nil {
		t.Fatalf("no copy of the damaged block aside: %v", err)
	}
	var dropped uint64
	for _, d := range ar.Dropped {
		if d.LostTo == 0 || len(d.Subjects) == 0 {
			t.Fatalf("dropped span %v names no sequences or subjects", d)
		}
		dropped += d.LostTo - d.LostFrom + 1
	}
	if dropped == 0 || dropped > 2 {
		t.Fatalf("dropped %d records for 2 KB of flipped bytes in 60 KB records, want 1 or 2: %v", dropped, ar.Dropped)
	}
	if _, err := os.Stat(filepath.Join(ar.Aside, jetstream.DroppedFile)); err != nil {
		t.Fatalf("no %s aside: %v", jetstream.DroppedFile, err)
	}
	again, err := jetstream.CheckStore(ctx, dir, jetstream.StoreCheckConfig{})
	if err != nil || again.Err() != nil {
		t.Fatalf("after accepting: %v, %v", err, again.Err())
	}
	srv := natstest.ServerAt(t, dir)
	nc := natstest.Connect(t, srv.ClientURL())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	if st.LastSeq != 300 || st.Msgs != 300-dropped {
		t.Fatalf("stream after accepting: %+v, want last 300 and %d messages (all but the dropped)", st, 300-dropped)
	}
	t.Logf("stream after accepting: %d messages, last %d, %d deleted; dropped %v", st.Msgs, st.LastSeq, st.NumDeleted, ar.Dropped)
	if _, err := js.Consumer(ctx, "TOOLS_EVENTS", "views"); !errors.Is(err, natsjs.ErrConsumerNotFound) {
		t.Fatalf("damaged consumer: %v, want it gone (moved aside)", err)
	}
}

// CheckStore reads untrusted bytes (a block,
// index.db, a consumer's o.dat): whatever they hold it returns, without
// panicking, and a block it reads whole is never reported damaged when
// it holds no record.
func FuzzCheckStore(f *testing.F) {
	rec := func(seq uint64, subj, body string) []byte {
		b := make([]byte, 22, 22+len(subj)+len(body)+8)
		binary.LittleEndian.PutUint32(b, uint32(22+len(subj)+len(body)+8))
		binary.LittleEndian.PutUint64(b[4:], seq)
		binary.LittleEndian.PutUint16(b[20:], uint16(len(subj)))
		b = append(b, subj...)
		b = append(b, body...)
		return append(b, make([]byte, 8)...)
	}
	f.Add(rec(1, "tools.events.a", "x"), []byte{11, 4, 0}, []byte{22, 2, 1, 1, 1, 1, 0, 0})
	f.Add(append(rec(1, "a", "b"), rec(1<<36, "a", "b")...), []byte{}, []byte{22, 1, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3}, make([]byte, 40), []byte("garbage"))
	f.Fuzz(func(t *testing.T, blk, idx, odat []byte) {
		dir := t.TempDir()
		sdir := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS")
		if err := os.MkdirAll(filepath.Join(sdir, "msgs"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sdir, "obs", "views"), 0o750); err != nil {
			t.Fatal(err)
		}
		meta := `{"name":"TOOLS_EVENTS","deny_delete":true,"deny_purge":true,"max_msgs":-1,"max_bytes":-1,"max_msgs_per_subject":-1}`
		for name, data := range map[string][]byte{
			"meta.inf": []byte(meta), "msgs/1.blk": blk, "msgs/index.db": idx, "obs/views/o.dat": odat,
		} {
			if err := os.WriteFile(filepath.Join(sdir, name), data, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := jetstream.CheckStore(context.Background(), dir, jetstream.StoreCheckConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Bytes > int64(len(blk)) {
			t.Fatalf("read %d bytes of a %d-byte block", rep.Bytes, len(blk))
		}
		_ = rep.Err()
	})
}

// signedRecord is a block record of stream's block index with a valid
// checksum, as nats-server writes it.
func signedRecord(t *testing.T, stream string, index uint32, seq uint64) []byte {
	t.Helper()
	subj, body := "$KV.GARBAGE.k", []byte("v")
	rl := 22 + len(subj) + len(body) + 8
	b := make([]byte, 22, rl)
	binary.LittleEndian.PutUint32(b, uint32(rl))
	binary.LittleEndian.PutUint64(b[4:], seq)
	binary.LittleEndian.PutUint64(b[12:], uint64(time.Now().UnixNano()))
	binary.LittleEndian.PutUint16(b[20:], uint16(len(subj)))
	b = append(b, subj...)
	b = append(b, body...)
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, index)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		t.Fatal(err)
	}
	hh.Write(b[4:20])
	hh.Write([]byte(subj))
	hh.Write(body)
	return hh.Sum(b)
}
