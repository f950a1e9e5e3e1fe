package actor_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolintent/engine/actor"
)

// memKeys is an in-memory actor.KeyStore for the pure package's tests (the
// JetStream one is tested against a real server in jetstream/ and service/).
type memKeys struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *memKeys) Get(_ context.Context, id string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[id]
	if !ok {
		return nil, actor.ErrNoKey
	}
	return v, nil
}

func (k *memKeys) Create(_ context.Context, id string, w []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[id]; ok {
		return actor.ErrKeyExists
	}
	k.m[id] = bytes.Clone(w)
	return nil
}

func (k *memKeys) Destroy(_ context.Context, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, id)
	return nil
}

var opKey = []byte("0123456789abcdef0123456789abcdef")

// Hash mode is deterministic (same key and actor, same token), keyed
// (another key, another token), carries no actor bytes, and reveal gives
// the token back as stored.
func TestHashDeterministic(t *testing.T) {
	ctx := context.Background()
	s, err := actor.New(actor.Config{Mode: actor.Hash, Key: opKey})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Seal(ctx, "alice@example.com")
	b, _ := s.Seal(ctx, "alice@example.com")
	if a != b || !strings.HasPrefix(a, "h1:") || len(a) != 3+32 || strings.Contains(a, "alice") {
		t.Fatalf("hash tokens %q %q: want one h1: token of 32 hex digits without the actor", a, b)
	}
	if a != s.Token("alice@example.com") {
		t.Errorf("Seal %q differs from Token %q", a, s.Token("alice@example.com"))
	}
	other, _ := actor.New(actor.Config{Mode: actor.Hash, Key: []byte("another key, also 32 bytes long!")})
	if o, _ := other.Seal(ctx, "alice@example.com"); o == a {
		t.Errorf("two operator keys gave the same token %q", o)
	}
	if c, _ := s.Seal(ctx, "bob"); c == a {
		t.Errorf("two actors gave the same token %q", c)
	}
	if r, err := s.Reveal(ctx, a); r != a || err != nil {
		t.Errorf("reveal of a token: %q %v, want it as stored", r, err)
	}
}

// Encrypt mode round-trips, each seal differs (random nonce), the
// key store names no person and holds the data key wrapped; forget makes
// every earlier value erased, also after the person writes again under a
// new key; another operator key is ErrWrongKey, not erased.
func TestEncryptForget(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string][]byte{}}
	s, err := actor.New(actor.Config{Mode: actor.Encrypt, Key: opKey, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	x, err := s.Seal(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	y, _ := s.Seal(ctx, "alice@example.com")
	if x == y || !strings.HasPrefix(x, "e1:"+s.KeyID("alice@example.com")+":") || strings.Contains(x, "alice") {
		t.Fatalf("sealed %q and %q", x, y)
	}
	if len(keys.m) != 1 {
		t.Fatalf("%d keys after two seals of one actor, want 1", len(keys.m))
	}
	for id, w := range keys.m {
		if strings.Contains(id, "alice") || bytes.Contains(w, []byte("alice")) {
			t.Errorf("key store names the person: %q", id)
		}
	}
	for _, v := range []string{x, y} {
		if got, err := s.Reveal(ctx, v); got != "alice@example.com" || err != nil {
			t.Errorf("reveal %q: %q %v", v, got, err)
		}
	}
	wrong, _ := actor.New(actor.Config{Mode: actor.Encrypt, Key: []byte("another key, also 32 bytes long!"), Keys: keys})
	if _, err := wrong.Reveal(ctx, x); !errors.Is(err, actor.ErrWrongKey) || errors.Is(err, actor.ErrErased) {
		t.Errorf("reveal with another operator key: %v, want ErrWrongKey", err)
	}
	if _, err := s.Forget(ctx, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reveal(ctx, x); !errors.Is(err, actor.ErrErased) {
		t.Errorf("reveal after forget: %v, want ErrErased", err)
	}
	z, err := s.Seal(ctx, "alice@example.com") // writes again: a new key
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Reveal(ctx, z); got != "alice@example.com" || err != nil {
		t.Errorf("reveal of a write after forget: %q %v", got, err)
	}
	if _, err := s.Reveal(ctx, y); !errors.Is(err, actor.ErrErased) {
		t.Errorf("reveal of a value sealed before forget, under the new key: %v, want ErrErased", err)
	}
	if r, err := s.Reveal(ctx, "anonymous"); r != "anonymous" || err != nil {
		t.Errorf("reveal of a plain actor: %q %v", r, err)
	}
	if _, err := s.Reveal(ctx, "e1:zz"); !errors.Is(err, actor.ErrMalformed) {
		t.Errorf("reveal of a malformed value: %v", err)
	}
}

// The longest actor that fits is sealed within the event format's
// limit; a longer one is refused with ErrTooLong.
func TestEncryptLength(t *testing.T) {
	ctx := context.Background()
	s, _ := actor.New(actor.Config{Mode: actor.Encrypt, Key: opKey, Keys: &memKeys{m: map[string][]byte{}}})
	v, err := s.Seal(ctx, strings.Repeat("a", actor.MaxActorLen))
	if err != nil || len(v) > actor.MaxStoredLen {
		t.Fatalf("seal of %d bytes: %d bytes, %v", actor.MaxActorLen, len(v), err)
	}
	if _, err := s.Seal(ctx, strings.Repeat("a", actor.MaxActorLen+1)); !errors.Is(err, actor.ErrTooLong) {
		t.Errorf("seal of %d bytes: %v, want ErrTooLong", actor.MaxActorLen+1, err)
	}
}

// Configuration errors name the problem.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  actor.Config
		want error
	}{
		{actor.Config{Mode: "rot13"}, actor.ErrBadMode},
		{actor.Config{Mode: actor.Hash}, actor.ErrNoKeyFile},
		{actor.Config{Mode: actor.Hash, Key: []byte("short")}, actor.ErrKeyTooShort},
		{actor.Config{Mode: actor.Encrypt, Key: opKey}, actor.ErrNoKeyStore},
	} {
		if _, err := actor.New(c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.cfg.Mode, err, c.want)
		}
	}
	if s, err := actor.New(actor.Config{}); err != nil || s.Mode() != actor.Plain {
		t.Errorf("zero config: %v", err)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("0123456789\n"), 0o600)
	if _, err := actor.ReadKeyFile(short); !errors.Is(err, actor.ErrKeyTooShort) {
		t.Errorf("short key file: %v", err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, append(opKey, '\n'), 0o600)
	if k, err := actor.ReadKeyFile(good); err != nil || !bytes.Equal(k, opKey) {
		t.Errorf("key file: %q %v", k, err)
	}
}

// countingKeys counts the key store's reads.
type countingKeys struct {
	memKeys
	gets atomic.Int64
}

func (k *countingKeys) Get(ctx context.Context, id string) ([]byte, error) {
	k.gets.Add(1)
	return k.memKeys.Get(ctx, id)
}

// A Revealer reads each person's key once for a whole page of their
// events (each sealed with its own nonce), reveals the same names as
// Sealer.Reveal, and a Revealer made after a forget shows the person as
// erased.
func TestRevealerReadsEachKeyOnce(t *testing.T) {
	ctx := context.Background()
	keys := &countingKeys{memKeys: memKeys{m: map[string][]byte{}}}
	s, err := actor.New(actor.Config{Mode: actor.Encrypt, Key: opKey, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	people := []string{"alice@example.com", "bob@example.com"}
	var stored []string
	for i := range 100 {
		a, err := s.Seal(ctx, people[i%2])
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, a)
	}
	if stored[0] == stored[2] {
		t.Fatal("two seals of one person are byte-identical; the test needs distinct stored forms")
	}
	before := keys.gets.Load()
	r := s.Revealer()
	for i, a := range stored {
		got, err := r.Reveal(ctx, a)
		if err != nil || got != people[i%2] {
			t.Fatalf("reveal %d: %q %v, want %q", i, got, err, people[i%2])
		}
	}
	if n := keys.gets.Load() - before; n != 2 {
		t.Errorf("100 reveals of 2 people read the key store %d times, want 2", n)
	}
	if _, err := s.Forget(ctx, people[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revealer().Reveal(ctx, stored[0]); !errors.Is(err, actor.ErrErased) {
		t.Errorf("a new Revealer after forget: %v, want ErrErased", err)
	}
	if got, err := s.Revealer().Reveal(ctx, stored[1]); err != nil || got != people[1] {
		t.Errorf("the other person after forget: %q %v", got, err)
	}
}
