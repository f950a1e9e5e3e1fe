package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	enginejs "github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

var actorKey = []byte("test operator key of 32 bytes!!!")

const person = "alice@example.com"

// sealedEngine is an engine on url whose actors are sealed in mode, with
// its own connection, log and key store (as one engine process has).
func sealedEngine(t *testing.T, url string, mode actor.Mode, project bool) (*service.Engine, *enginejs.Log, *actor.Sealer) {
	t.Helper()
	e, log := stackOn(t, url, enginejs.LogConfig{}, resolver.Default(), service.Config{}, project)
	cfg := actor.Config{Mode: mode, Key: actorKey}
	if mode == actor.Encrypt {
		keys, err := log.OpenActorKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keys = keys
	}
	s, err := actor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.SetActorSealer(s)
	return e, log, s
}

// rawLast is the last stored message of session, read from the stream
// (no engine code between the test and the bytes).
func rawLast(t *testing.T, log *enginejs.Log, session string) []byte {
	t.Helper()
	ctx := context.Background()
	st, err := log.JetStream().Stream(ctx, log.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, log.Subject(session))
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

func storedActor(t *testing.T, data []byte) string {
	t.Helper()
	env, err := events.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return env.Actor
}

// In hash mode the log holds the person's token, never the actor's
// bytes; the same person always gets the same token (an audit is searched
// by computing it); engine-internal actors stay plain; RevealActor shows a
// token as stored.
func TestActorHashStoresNoPlainActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, s := sealedEngine(t, natstest.Server(t).ClientURL(), actor.Hash, true)
	for i := range 2 {
		if _, err := e.Apply(ctx, "s1", service.Origin{Channel: "web", Actor: person}, nil, events.ToolsToggled{Enabled: on(i == 0)}); err != nil {
			t.Fatal(err)
		}
		data := rawLast(t, log, "s1")
		if bytes.Contains(data, []byte("alice")) || bytes.Contains(data, []byte(person)) {
			t.Fatalf("stored event holds the actor's bytes: %q", data)
		}
		if got := storedActor(t, data); got != s.Token(person) {
			t.Errorf("write %d stored actor %q, want the token %q", i, got, s.Token(person))
		}
	}
	if got := e.RevealActor(ctx, s.Token(person)); got != s.Token(person) {
		t.Errorf("RevealActor of a token: %q", got)
	}
	if _, err := e.Apply(ctx, "s1", service.Origin{Channel: "web"}, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	if got := storedActor(t, rawLast(t, log, "s1")); got != service.Anonymous {
		t.Errorf("an engine-internal actor was stored as %q, want %q plain", got, service.Anonymous)
	}
}

// In encrypt mode the log holds a ciphertext, RevealActor reads the
// person back; after forget (through another connection, as the CLI does)
// the key is physically gone from the bucket (raw reads of the KV stream
// find neither the key nor its bytes) and every event of the person
// reveals as erased, on the engine that wrote it too.
func TestActorEncryptRevealForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	e, log, s := sealedEngine(t, srv.ClientURL(), actor.Encrypt, true)
	if _, err := e.Apply(ctx, "s1", service.Origin{Channel: "web", Actor: person}, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	data := rawLast(t, log, "s1")
	stored := storedActor(t, data)
	if bytes.Contains(data, []byte("alice")) || !strings.HasPrefix(stored, "e1:") {
		t.Fatalf("stored actor %q (event %q)", stored, data)
	}
	if got := e.RevealActor(ctx, stored); got != person {
		t.Fatalf("RevealActor: %q, want %q", got, person)
	}
	h, _, err := e.History(ctx, "s1", service.Until{}, service.ResolveRequest{})
	if err != nil || len(h) != 1 || h[0].Actor != person {
		t.Fatalf("history's actor is not revealed: %+v %v", h, err)
	}

	bucket := enginejs.ActorKeysBucket(log.Prefix())
	kv, err := log.JetStream().KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	id := s.KeyID(person)
	entry, err := kv.Get(ctx, id)
	if err != nil {
		t.Fatalf("raw read of the key before forget: %v", err)
	}
	wrapped := entry.Value()

	// forget, as engine actor forget does: its own connection and sealer
	_, _, forgetter := sealedEngine(t, srv.ClientURL(), actor.Encrypt, false)
	if got, err := forgetter.Forget(ctx, person); err != nil || got != id {
		t.Fatalf("forget: %q %v", got, err)
	}
	if _, err := kv.Get(ctx, id); !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		t.Errorf("raw read of the key after forget: %v, want not found", err)
	}
	if hist, err := kv.History(ctx, id); err == nil {
		for _, h := range hist {
			if len(h.Value()) > 0 {
				t.Errorf("a revision of the key survives forget: %d bytes (op %v)", len(h.Value()), h.Operation())
			}
		}
	}
	kst, err := log.JetStream().Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kst.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := kst.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > 0 && bytes.Contains(m.Data, wrapped) {
			t.Errorf("the KV stream still holds the destroyed key at seq %d", seq)
		}
	}
	if got := e.RevealActor(ctx, stored); got != service.ErasedActor {
		t.Errorf("RevealActor after forget: %q, want %q", got, service.ErasedActor)
	}
	if _, err := s.Reveal(ctx, stored); !errors.Is(err, service.ErrActorErased) {
		t.Errorf("reveal after forget: %v, want ErrActorErased", err)
	}
	if h, _, err := e.History(ctx, "s1", service.Until{}, service.ResolveRequest{}); err != nil || len(h) != 1 || h[0].Actor != service.ErasedActor {
		t.Errorf("history's actor after forget: %+v %v, want %q", h, err, service.ErasedActor)
	}
	// The log was not rewritten: the event is there, byte for byte.
	if !bytes.Equal(rawLast(t, log, "s1"), data) {
		t.Error("forget changed the stored event")
	}
}

// Two engines racing on the first writes of the same people end with
// one key per person: each engine reveals every event the other wrote.
func TestActorKeyRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	e1, log, s1 := sealedEngine(t, srv.ClientURL(), actor.Encrypt, true)
	e2, _, _ := sealedEngine(t, srv.ClientURL(), actor.Encrypt, false)
	const people = 16
	stored := make([][2]string, people)
	for p := range people {
		who := fmt.Sprintf("person-%d", p)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, e := range []*service.Engine{e1, e2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				session := fmt.Sprintf("p%d-e%d", p, i)
				if _, err := e.Apply(ctx, session, service.Origin{Channel: "web", Actor: who}, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
					t.Error(err)
					return
				}
			}()
		}
		close(start)
		wg.Wait()
		for i := range 2 {
			stored[p][i] = storedActor(t, rawLast(t, log, fmt.Sprintf("p%d-e%d", p, i)))
		}
	}
	for p := range people {
		who := fmt.Sprintf("person-%d", p)
		for i := range 2 {
			for j, e := range []*service.Engine{e1, e2} {
				if got := e.RevealActor(ctx, stored[p][i]); got != who {
					t.Errorf("engine %d reveals engine %d's event of %s as %q: two keys were made", j+1, i+1, who, got)
				}
			}
		}
	}
	kv, err := log.JetStream().KeyValue(ctx, enginejs.ActorKeysBucket(log.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for p := range people {
		want[s1.KeyID(fmt.Sprintf("person-%d", p))] = true
	}
	n := 0
	for k := range keys.Keys() {
		n++
		if !want[k] || strings.Contains(k, "person") {
			t.Errorf("key %q is not the keyed-hash id of one of the people", k)
		}
	}
	if n != people {
		t.Errorf("%d keys for %d people", n, people)
	}
}

// Sealing changes only the stored actor: the resolved tools, the
// rendering, the prefix and contract hashes are those of a plain engine,
// and no sealed actor reaches the resolution.
func TestActorSealingLeavesFoldUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	plain, _ := stackOn(t, srv.ClientURL(), enginejs.LogConfig{Prefix: "plain"}, resolver.Default(), service.Config{}, true)
	sealed, _, _ := sealedEngine(t, srv.ClientURL(), actor.Encrypt, true)
	cmds := []events.Payload{events.ToolsToggled{Enabled: on(true)}, events.WebSearchSet{Enabled: on(true)}, events.ToolDisabled{Name: "bash"}}
	origin := service.Origin{Channel: "web", Actor: person}
	var views [2]wire.TurnView
	for i, e := range []*service.Engine{plain, sealed} {
		if _, err := e.Apply(ctx, "s1", origin, nil, cmds...); err != nil {
			t.Fatal(err)
		}
		v, err := e.Resolve(ctx, "s1", service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v
	}
	a, b := views[0], views[1]
	if a.ContractHash != b.ContractHash || a.PrefixHash != b.PrefixHash || !bytes.Equal(a.Rendering, b.Rendering) || strings.Join(a.Tools, ",") != strings.Join(b.Tools, ",") {
		t.Errorf("sealing changed the resolution: contract %s/%s prefix %s/%s", a.ContractHash, b.ContractHash, a.PrefixHash, b.PrefixHash)
	}
	j, _ := json.Marshal(b)
	if bytes.Contains(j, []byte("e1:")) || bytes.Contains(j, []byte("alice")) {
		t.Errorf("the resolution carries an actor: %s", j)
	}
}

// What sealing adds to a write (hash: an HMAC; encrypt: AES-GCM with
// the person's key, read from KV once per 10 s), and what RevealActor of
// an encrypted actor costs (one KV get), against a real server.
func BenchmarkActorModes(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []actor.Mode{actor.Plain, actor.Hash, actor.Encrypt} {
		srv := natstest.Server(b)
		nc := natstest.Connect(b, srv.ClientURL())
		log, err := enginejs.OpenLog(ctx, nc, enginejs.LogConfig{})
		if err != nil {
			b.Fatal(err)
		}
		proj, err := projection.Open(ctx, log, projection.Config{})
		if err != nil {
			b.Fatal(err)
		}
		e := service.New(log, proj, resolver.Default(), service.Config{})
		var s *actor.Sealer
		if mode != actor.Plain {
			cfg := actor.Config{Mode: mode, Key: actorKey}
			if mode == actor.Encrypt {
				if cfg.Keys, err = log.OpenActorKeys(ctx); err != nil {
					b.Fatal(err)
				}
			}
			s, _ = actor.New(cfg)
			e.SetActorSealer(s)
		}
		b.Run("apply-"+string(mode), func(b *testing.B) {
			for i := range b.N {
				if _, err := e.Apply(ctx, fmt.Sprintf("b%d", i%64), service.Origin{Channel: "web", Actor: person}, nil, events.ToolsToggled{Enabled: on(i%2 == 0)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if mode == actor.Encrypt {
			stored, _ := s.Seal(ctx, person)
			b.Run("reveal-encrypt", func(b *testing.B) {
				for range b.N {
					if e.RevealActor(ctx, stored) != person {
						b.Fatal("reveal")
					}
				}
			})
		}
	}
}

// A writer cannot send an actor in the engine's sealed forms (it
// could pass a copied token or ciphertext off as another person's), in
// plain mode as in the sealing modes; nothing is written.
func TestActorSealedFormRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	for _, mode := range []actor.Mode{actor.Plain, actor.Encrypt} {
		e, log, _ := sealedEngine(t, srv.ClientURL(), mode, mode == actor.Plain)
		for _, forged := range []string{"h1:00ff", "e1:abc:def"} {
			s := "forged-" + string(mode)
			_, err := e.Apply(ctx, s, service.Origin{Channel: "web", Actor: forged}, nil, events.ToolDisabled{Name: "bash"})
			if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), forged) {
				t.Errorf("%s: actor %q: %v, want ErrInvalid naming it", mode, forged, err)
			}
			if last, err := log.LastSeq(ctx, s); err != nil || last != 0 {
				t.Errorf("%s: actor %q: session at %d %v, want nothing written", mode, forged, last, err)
			}
		}
	}
}
