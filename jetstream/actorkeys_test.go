package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// The actor key store: Get of a missing key is actor.ErrNoKey; of
// creates racing on one id exactly one wins and the others get
// actor.ErrKeyExists; Destroy leaves no revision with the key's bytes in
// the bucket's stream (raw reads); destroying a missing key is no error;
// after a destroy the id can be created anew; two opens of the bucket
// (two engines starting) share it.
func TestActorKeysStore(t *testing.T) {
	ctx := context.Background()
	l, nc := openLog(t)
	keys, err := l.OpenActorKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.OpenActorKeys(ctx)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	const id = "0123456789abcdef0123456789abcdef"
	if _, err := keys.Get(ctx, id); !errors.Is(err, actor.ErrNoKey) {
		t.Fatalf("get of a missing key: %v", err)
	}
	const n = 8
	var wg sync.WaitGroup
	wins := make(chan []byte, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := bytes.Repeat([]byte{byte('a' + i)}, 60)
			store := keys
			if i%2 == 1 {
				store = again
			}
			err := store.Create(ctx, id, v)
			switch {
			case err == nil:
				wins <- v
			case !errors.Is(err, actor.ErrKeyExists):
				t.Errorf("create %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won [][]byte
	for v := range wins {
		won = append(won, v)
	}
	if len(won) != 1 {
		t.Fatalf("%d creates of one id succeeded, want 1", len(won))
	}
	got, err := again.Get(ctx, id)
	if err != nil || !bytes.Equal(got, won[0]) {
		t.Fatalf("get: %q %v, want the winner's key", got, err)
	}
	if err := keys.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Get(ctx, id); !errors.Is(err, actor.ErrNoKey) {
		t.Errorf("get after destroy: %v", err)
	}
	js, _ := njs.New(nc)
	st, err := js.Stream(ctx, "KV_"+jetstream.ActorKeysBucket(l.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, njs.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m.Data, won[0]) {
			t.Errorf("raw read: seq %d still holds the destroyed key", seq)
		}
	}
	if err := keys.Destroy(ctx, "ffffffffffffffffffffffffffffffff"); err != nil {
		t.Errorf("destroy of a missing key: %v", err)
	}
	if err := keys.Create(ctx, id, []byte("new")); err != nil {
		t.Errorf("create after destroy: %v", err)
	}
}

// A key another engine created is found although a replica behind the
// bucket's leader answers about half the reads without it (the engine
// that lost a create race then reads the winner's key): never
// actor.ErrNoKey. A destroyed key is missing everywhere.
func TestActorKeyIsFoundPastALaggingReplica(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	keys, err := l.OpenActorKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, "other", []byte("o")); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, l.JetStream(), "KV_"+keys.Bucket(), "$KV."+keys.Bucket()+".other")
	if err := keys.Create(ctx, "person", []byte("wrapped")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		v, err := keys.Get(ctx, "person")
		if err != nil || string(v) != "wrapped" {
			t.Fatalf("read %d of the created key: %q, %v", i, v, err)
		}
	}
	if err := keys.Destroy(ctx, "person"); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Get(ctx, "person"); !errors.Is(err, actor.ErrNoKey) {
		t.Fatalf("read of the destroyed key: %v; want actor.ErrNoKey", err)
	}
}

// A destroy whose purge is answered late is asked again, and the second
// copy reaches the server after the person's key was made anew (their
// next write, through another engine): it is refused, and the new key
// stays. Here the purge's reply is held 1.5 s, past the re-ask after 1 s,
// and the new key is made at 0.5 s.
func TestActorKeyMadeAnewSurvivesALateSecondPurge(t *testing.T) {
	ctx := context.Background()
	direct, nc := openLog(t)
	other, err := direct.OpenActorKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := natstest.NewHoldProxy(t, nc.ConnectedUrl())
	keys, err := p.OpenLog(t, 10*time.Second).OpenActorKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Create(ctx, "person", []byte("old")); err != nil {
		t.Fatal(err)
	}
	p.Arm("KV-Operation: PURGE", natstest.HoldReplies, 1500*time.Millisecond)
	made := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		made <- other.Create(ctx, "person", []byte("new"))
	}()
	if err := keys.Destroy(ctx, "person"); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if err := <-made; err != nil {
		t.Fatalf("make the key anew after the purge: %v", err)
	}
	v, err := other.Get(ctx, "person")
	if err != nil || string(v) != "new" {
		t.Fatalf("the key made anew: %q, %v; want it kept", v, err)
	}
}
