package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// purgedStore writes 300 messages of about 60 KB on the event stream of a
// fresh embedded server whose block maintenance runs every 100 ms: every
// fourth on the session "keep", the others on "big"; then it erases "big"
// below a 301st message (the audit stream records the purged range; no
// accepted-loss file is written), waits until the server has rewritten the first block without
// the purged records, stops the server and returns the data directory and
// the stream's msgs directory.
func purgedStore(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir, SyncEvery: 100 * time.Millisecond})
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
	for i := range 300 {
		session := "big"
		if i%4 == 0 {
			session = "keep"
		}
		if _, err := js.Publish(ctx, "tools.events."+session, body); err != nil {
			t.Fatal(err)
		}
	}
	x, err := l.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	del, err := js.Publish(ctx, "tools.events.big", body)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := x.Erase(ctx, "big", del.Sequence)
	if err != nil || rep.Purged != 225 {
		t.Fatalf("erase big: %+v, %v; want 225 purged", rep, err)
	}
	mdir := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "msgs")
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		fi, err := os.Stat(filepath.Join(mdir, "1.blk"))
		if err != nil {
			return err
		}
		if fi.Size() > 4<<20 {
			return fmt.Errorf("1.blk is %d bytes: not rewritten yet", fi.Size())
		}
		return nil
	})
	nc.Close()
	srv.Shutdown()
	return dir, mdir
}

// A purge the server has compacted away (the purged records gone from the
// middle of a sealed block) is not damage: the store check knows every
// range the engine purged from the audit stream's records, with no file
// beside the store. A record missing from a range no purge names is
// still damage, named by its sequence; accepting it changes no block, so
// no record after it is lost.
func TestCheckStoreExpectsPurgedRuns(t *testing.T) {
	ctx := context.Background()
	orig, _ := purgedStore(t)
	if _, err := os.Stat(filepath.Join(orig, jetstream.AcceptedLossFile)); err == nil {
		t.Fatalf("%s exists: the check must not need it", jetstream.AcceptedLossFile)
	}
	rep, err := jetstream.CheckStore(ctx, orig, jetstream.StoreCheckConfig{})
	if err != nil || rep.Err() != nil {
		t.Fatalf("store after an erase the server compacted: %v, %v", err, rep.Err())
	}
	if rep.Records < 75 {
		t.Fatalf("%d records checked, want the 75 of keep and more", rep.Records)
	}

	// Splice one record of keep out of the rewritten block: its checksum
	// and those around it stay right, as after a purge, but the erase's
	// audit record counts 225 purged messages in 2..300, and 226 are gone.
	dir, mdir := copyStore(t, orig)
	blk := filepath.Join(mdir, "1.blk")
	offs := recordOffsets(t, blk)
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) < 3 {
		t.Fatalf("1.blk holds %d records, want 3 or more", len(offs))
	}
	if err := os.WriteFile(blk, append(b[:offs[1]:offs[1]], b[offs[2]:]...), 0o640); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll("/tmp/splicedir")
	os.CopyFS("/tmp/splicedir/data", os.DirFS(dir))
	rep = mustDamage(t, dir, "226 sequences are missing from 2..300", "erase of big", "account for 225", "1 messages of other sessions are gone")
	ar, err := jetstream.AcceptStoreDamage(ctx, dir, rep, time.Now())
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if len(ar.Dropped) != 0 || len(ar.Accepted) != 1 || ar.Accepted[0].From != 2 || ar.Accepted[0].To != 300 || ar.Accepted[0].Count != 1 {
		t.Fatalf("accepting a gap: dropped %v, accepted %v; want nothing dropped and 1 message of 2..300 accepted", ar.Dropped, ar.Accepted)
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
	st, err := s.Info(ctx, natsjs.WithSubjectFilter("tools.events.keep"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.State.Subjects["tools.events.keep"]; got != 74 {
		t.Fatalf("keep holds %d messages after accepting, want 74 (75 less the spliced one)", got)
	}
}
