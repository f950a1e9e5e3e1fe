package projection_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// damageStream flips a tenth of the bytes (at least 64) from fraction at of a stopped store's last
// block of stream and, when crashed, removes the stream's index (as a
// crash leaves it), so the server rebuilds its state from the damaged
// block on the next start.
func damageStream(t *testing.T, dir, stream string, at float64, crashed bool) {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if len(blks) == 0 {
		t.Fatalf("no block files of %s under %s", stream, dir)
	}
	blk := blks[len(blks)-1]
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	from := int(float64(len(b)) * at)
	for i := from; i < from+max(64, len(b)/10) && i < len(b); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(blk, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if crashed {
		if err := os.Remove(filepath.Join(filepath.Dir(blk), "index.db")); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// A store that lost acknowledged events (bytes flipped in the
// events block) is detected against the projection's watermark and
// reported as damaged, naming the gap, even after new appends reach past
// the watermark and across a restart; nothing is folded over the loss.
func TestDamagedLogDetected(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := natstest.ServerAt(t, dir)
	e := open(t, srv.ClientURL())
	p, stop := start(t, e.log)
	last := appendRandom(t, e.log, rand.New(rand.NewPCG(12, 3)), 20, 500)
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	stop()
	e.nc.Close()
	srv.Shutdown()
	damageStream(t, dir, "TOOLS_EVENTS", 0.5, true)

	srv = natstest.ServerAt(t, dir)
	e = open(t, srv.ClientURL())
	kept, err := e.log.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kept >= last {
		t.Fatalf("damage did not shorten the stream: last seq %d of %d", kept, last)
	}
	p, stop = start(t, e.log)
	var damage error
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if damage = p.Damaged(ctx); damage == nil {
			return errors.New("no damage reported")
		}
		return nil
	})
	want := regexp.MustCompile(`^damaged log: stream last seq \d+ < folded \d+`)
	if !errors.Is(damage, jetstream.ErrDamagedLog) || !want.MatchString(damage.Error()) {
		t.Fatalf("damage: %v, want %s", damage, want)
	}
	t.Logf("detected: %v (stream kept %d of %d events)", damage, kept, last)
	if p.Applied() != 0 || p.Folded() != 0 {
		t.Fatalf("projection folded over the loss: applied %d, folded %d", p.Applied(), p.Folded())
	}
	// New appends carry the stream past the watermark: still damaged.
	appendRandom(t, e.log, rand.New(rand.NewPCG(12, 4)), 20, int(last-kept)+10)
	if err := p.Damaged(ctx); err == nil {
		t.Fatal("damage forgotten once the stream grew past the watermark")
	}
	stop()
	p2, _ := start(t, e.log)
	if err := p2.Damaged(ctx); !errors.Is(err, jetstream.ErrDamagedLog) {
		t.Fatalf("damage forgotten across a restart: %v", err)
	}
}

// Views lost from a damaged views file are refolded from the
// log, never served as the defaults: every read equals a serial fold.
func TestDamagedViewsRefolded(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := natstest.ServerAt(t, dir)
	e := open(t, srv.ClientURL())
	p, stop := start(t, e.log)
	last := appendRandom(t, e.log, rand.New(rand.NewPCG(12, 5)), 40, 400)
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := natstest.FoldLog(t, e.log)
	stop()
	e.nc.Close()
	srv.Shutdown()
	damageStream(t, dir, "KV_TOOLS_VIEWS", 0.8, true)

	srv = natstest.ServerAt(t, dir)
	e = open(t, srv.ClientURL())
	views, err := e.log.OpenViews(ctx, "VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for s := range want {
		data, err := views.Get(ctx, s)
		if err != nil || data == nil {
			lost++
		} else if st, err := aggregate.UnmarshalState(data); err != nil || !reflect.DeepEqual(st, want[s]) {
			lost++ // undecodable, or an older view than was written
		}
	}
	if lost == 0 {
		t.Fatal("the damage lost no view: the test shows nothing")
	}
	t.Logf("%d of %d views lost or stale after the damage", lost, len(want))
	p, _ = start(t, e.log)
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	for s, w := range want {
		v, err := p.Read(ctx, s, projection.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("session %s after views damage:\nread %+v\nfold %+v", s, v, w)
		}
	}
	if err := p.Damaged(ctx); err != nil {
		t.Fatalf("intact log reported damaged: %v", err)
	}
}
