package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/wire"
)

// Serve refuses bad actor flags before starting, naming the flag and
// the fix: an unknown mode, hash or encrypt without a key file, a key file
// that is too short.
func TestActorFlagsRefused(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--actor-mode", "rot13"}, []string{"--actor-mode", "plain", "hash", "encrypt"}},
		{[]string{"--actor-mode", "hash"}, []string{"--actor-mode hash needs --actor-key-file", "openssl rand -hex 32"}},
		{[]string{"--actor-mode", "encrypt"}, []string{"--actor-mode encrypt needs --actor-key-file"}},
		{[]string{"--actor-mode", "encrypt", "--actor-key-file", short}, []string{"--actor-key-file", "10 bytes, at least 32"}},
	} {
		dir := t.TempDir()
		args := append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, c.args...)
		out, _, err := runEngineWithin(t, 20*time.Second, args...)
		if err == nil {
			t.Errorf("serve %v started", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("serve %v: %q does not say %q", c.args, out, w)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, jetstream.CredentialsFile)); err == nil {
			t.Errorf("serve %v made a store before refusing", c.args)
		}
	}
}

// The built binary in encrypt mode stores no actor bytes in the
// stream; engine actor forget destroys the person's key through the admin
// connection while the engine serves (a raw KV read finds nothing); the
// event stays byte for byte; engine actor token prints the hash token the
// actor package computes.
func TestActorEncryptForgetBinary(t *testing.T) {
	ctx := context.Background()
	keyFile := filepath.Join(t.TempDir(), "actor.key")
	if err := os.WriteFile(keyFile, []byte("cafebabecafebabecafebabecafebabecafebabecafebabecafebabecafebabe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startEngine(t, dir, "--actor-mode", "encrypt", "--actor-key-file", keyFile)
	const who = "carol@example.com"
	c := client.NewHTTP(p.HTTPURL, client.WithChannel("web"), client.WithActor(who))
	if _, err := c.Append(ctx, client.AppendRequest{Session: "act-s1", Commands: []wire.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, jetstream.EventStreamName("tools"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "tools.events.act-s1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(m.Data, []byte("carol")) {
		t.Fatalf("the stored event holds the actor: %q", m.Data)
	}
	env, err := events.Decode(m.Data)
	if err != nil || !strings.HasPrefix(env.Actor, actor.EncryptPrefix) {
		t.Fatalf("stored actor %q (%v), want e1:...", env.Actor, err)
	}
	key, err := actor.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := actor.New(actor.Config{Mode: actor.Hash, Key: key})
	id := hs.KeyID(who)
	kv, err := js.KeyValue(ctx, jetstream.ActorKeysBucket("tools"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, id); err != nil {
		t.Fatalf("the person's key before forget: %v", err)
	}

	out, _, err := runEngine(t, "actor", "forget", who, "--nats", p.NATSURL, "--data", dir, "--actor-key-file", keyFile)
	if err != nil || !strings.Contains(out, "forgot") || !strings.Contains(out, id) {
		t.Fatalf("engine actor forget: %v\n%s", err, out)
	}
	if _, err := kv.Get(ctx, id); !errors.Is(err, njs.ErrKeyNotFound) && !errors.Is(err, njs.ErrKeyDeleted) {
		t.Errorf("raw read of the key after forget: %v, want none", err)
	}
	m2, err := st.GetLastMsgForSubject(ctx, "tools.events.act-s1")
	if err != nil || !bytes.Equal(m2.Data, m.Data) {
		t.Errorf("forget touched the log: %v", err)
	}

	out, _, err = runEngine(t, "actor", "token", who, "--actor-key-file", keyFile)
	if err != nil || strings.TrimSpace(out) != hs.Token(who) {
		t.Errorf("engine actor token: %q %v, want %s", out, err, hs.Token(who))
	}
}
