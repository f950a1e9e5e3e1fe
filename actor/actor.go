// Package actor seals the actor an event records: stored as written
// (plain), as a keyed hash (hash), or encrypted under a per-person data
// key that can be destroyed (encrypt: crypto-shredding), so forgetting a
// person never rewrites the log.
//
// The package is pure: standard library crypto only. The data keys live
// in a KeyStore the caller provides (jetstream.ActorKeys in the engine).
//
// Stored forms:
//
//	plain    the actor itself
//	hash     "h1:" + 32 hex digits of HMAC-SHA256(hash key, actor)
//	encrypt  "e1:" + key id + ":" + base64url(nonce | AES-256-GCM(actor))
//
// The hash key, the key-id key and the key-wrapping key are derived from
// the operator's key file by HMAC-SHA256 with distinct labels. The key id
// is 32 hex digits of HMAC-SHA256(key-id key, actor): the key store names
// no person. Data keys are stored wrapped (AES-256-GCM under the wrapping
// key, the key id as additional data): a copy of the key store alone
// decrypts nothing.
package actor

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Mode is how actors are stored.
type Mode string

// The modes.
const (
	// Plain stores the actor as given (the default).
	Plain Mode = "plain"
	// Hash stores a keyed hash of the actor: the same actor always gives
	// the same token; nobody reads the actor back from it.
	Hash Mode = "hash"
	// Encrypt stores the actor encrypted under the person's data key;
	// destroying the key erases the actor from every event at once.
	Encrypt Mode = "encrypt"
)

// Prefixes of the stored forms.
const (
	HashPrefix    = "h1:"
	EncryptPrefix = "e1:"
)

// MinKeyLen is the shortest operator key file, in bytes (256 bits).
const MinKeyLen = 32

// MaxStoredLen is the longest stored actor, in bytes (the event format's
// limit on texts).
const MaxStoredLen = 256

// Sentinel errors.
var (
	// ErrBadMode: the mode is none of plain, hash, encrypt.
	ErrBadMode = errors.New("unknown actor mode")
	// ErrKeyTooShort: the operator key file holds fewer than MinKeyLen bytes.
	ErrKeyTooShort = errors.New("actor key file too short")
	// ErrNoKeyFile: hash and encrypt need the operator key.
	ErrNoKeyFile = errors.New("actor mode needs a key file")
	// ErrNoKeyStore: encrypt needs a key store.
	ErrNoKeyStore = errors.New("encrypt mode needs a key store")
	// ErrErased: the actor's data key was destroyed (the person was
	// forgotten); the actor can never be read back.
	ErrErased = errors.New("actor erased")
	// ErrWrongKey: the data key cannot be unwrapped with this operator key
	// (another key file than the one that wrote it).
	ErrWrongKey = errors.New("actor key does not open the stored data key")
	// ErrTooLong: the sealed actor would exceed MaxStoredLen.
	ErrTooLong = errors.New("actor too long to seal")
	// ErrMalformed: a stored value with a sealed prefix that is not one.
	ErrMalformed = errors.New("malformed sealed actor")
	// ErrNoKey is returned by a KeyStore that holds no key under an id
	// (never created, or destroyed).
	ErrNoKey = errors.New("no actor key")
	// ErrKeyExists is returned by KeyStore.Create when the id holds a key.
	ErrKeyExists = errors.New("actor key exists")
)

// ParseMode parses a mode name; "" is Plain.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", Plain:
		return Plain, nil
	case Hash, Encrypt:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w %q: use plain, hash or encrypt", ErrBadMode, s)
}

// ReadKeyFile reads an operator key file: its bytes with one trailing
// newline dropped, at least MinKeyLen of them (generate one with
// `head -c 32 /dev/urandom > FILE` or `openssl rand -hex 32 > FILE`).
func ReadKeyFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read actor key file: %w", err)
	}
	data = bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	if len(data) < MinKeyLen {
		return nil, fmt.Errorf("actor key file %s holds %d bytes, at least %d needed (make one with `openssl rand -hex 32 > %s`): %w", path, len(data), MinKeyLen, path, ErrKeyTooShort)
	}
	return data, nil
}

// KeyStore keeps the wrapped data keys of encrypt mode under their key
// ids. Implementations are safe for concurrent use.
type KeyStore interface {
	// Get returns the wrapped key stored under id; ErrNoKey when none.
	Get(ctx context.Context, id string) ([]byte, error)
	// Create stores wrapped under id when id holds no key, and answers
	// ErrKeyExists when it does (another writer created it first).
	Create(ctx context.Context, id string, wrapped []byte) error
	// Destroy removes the key under id for good (no copy kept); destroying
	// a missing key is not an error.
	Destroy(ctx context.Context, id string) error
}

// Config configures a Sealer. The zero value is plain mode.
type Config struct {
	// Mode is plain (default), hash or encrypt.
	Mode Mode
	// Key is the operator key (ReadKeyFile); hash and encrypt need it.
	Key []byte
	// Keys stores the data keys; encrypt needs it.
	Keys KeyStore
	// CacheFor is how long Seal reuses a data key it read or created
	// before reading it again (default 10s). Reveal never caches: a
	// forget is seen by the next reveal of every engine.
	CacheFor time.Duration
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if c.Mode == Hash || c.Mode == Encrypt {
		switch {
		case len(c.Key) == 0:
			errs = append(errs, fmt.Errorf("%w: mode %s", ErrNoKeyFile, c.Mode))
		case len(c.Key) < MinKeyLen:
			errs = append(errs, fmt.Errorf("%w: %d bytes, at least %d", ErrKeyTooShort, len(c.Key), MinKeyLen))
		}
	}
	if c.Mode == Encrypt && c.Keys == nil {
		errs = append(errs, ErrNoKeyStore)
	}
	return errors.Join(errs...)
}

// Sealer seals and reveals actors. It is safe for concurrent use.
type Sealer struct {
	mode     Mode
	hashKey  []byte
	idKey    []byte
	wrapKey  cipher.AEAD
	keys     KeyStore
	cacheFor time.Duration

	mu    sync.Mutex
	cache map[string]cachedKey // key id -> data key, for Seal
}

type cachedKey struct {
	aead  cipher.AEAD
	until time.Time
}

// maxCache bounds the sealing cache; past it the cache starts over.
const maxCache = 10_000

// New returns a sealer of cfg (Validate's errors).
func New(cfg Config) (*Sealer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sealer{mode: cfg.Mode, keys: cfg.Keys, cacheFor: cfg.CacheFor, cache: map[string]cachedKey{}}
	if s.mode == "" {
		s.mode = Plain
	}
	if s.cacheFor <= 0 {
		s.cacheFor = 10 * time.Second
	}
	if len(cfg.Key) > 0 {
		s.hashKey = derive(cfg.Key, "toolintent actor hash v1")
		s.idKey = derive(cfg.Key, "toolintent actor key id v1")
		s.wrapKey = newGCM(derive(cfg.Key, "toolintent actor key wrap v1"))
	}
	return s, nil
}

// Mode is the sealer's mode.
func (s *Sealer) Mode() Mode { return s.mode }

func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func mac(key []byte, actor string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(actor))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

func newGCM(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key) // 32 bytes: never fails
	if err != nil {
		panic(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

// Token is the hash-mode token of actor ("h1:" + 32 hex digits): the
// same key and actor always give the same token. It needs the operator
// key ("" without one).
func (s *Sealer) Token(actor string) string {
	if s.hashKey == nil {
		return ""
	}
	return HashPrefix + mac(s.hashKey, actor)
}

// KeyID is the id of actor's data key in encrypt mode: 32 hex digits of
// a keyed hash, which names no person ("" without an operator key).
func (s *Sealer) KeyID(actor string) string {
	if s.idKey == nil {
		return ""
	}
	return mac(s.idKey, actor)
}

// Seal returns the stored form of actor in the sealer's mode. Encrypt
// creates the person's data key on their first write (create-if-absent:
// racing writers end with one key). "" stays "".
func (s *Sealer) Seal(ctx context.Context, actor string) (string, error) {
	if actor == "" {
		return "", nil
	}
	switch s.mode {
	case Hash:
		return s.Token(actor), nil
	case Encrypt:
		id := s.KeyID(actor)
		aead, err := s.sealKey(ctx, id)
		if err != nil {
			return "", err
		}
		nonce := make([]byte, aead.NonceSize())
		_, _ = rand.Read(nonce)
		ct := aead.Seal(nonce, nonce, []byte(actor), []byte(EncryptPrefix+id))
		out := EncryptPrefix + id + ":" + base64.RawURLEncoding.EncodeToString(ct)
		if len(out) > MaxStoredLen {
			return "", fmt.Errorf("seal an actor of %d bytes: %d bytes sealed, at most %d (actors of at most %d bytes fit): %w", len(actor), len(out), MaxStoredLen, MaxActorLen, ErrTooLong)
		}
		return out, nil
	}
	return actor, nil
}

// MaxActorLen is the longest actor encrypt mode can seal, in bytes.
const MaxActorLen = (MaxStoredLen-len(EncryptPrefix)-32-1)*3/4 - 12 - 16

// sealKey returns the data key under id, from the cache, the store, or
// created.
func (s *Sealer) sealKey(ctx context.Context, id string) (cipher.AEAD, error) {
	now := time.Now()
	s.mu.Lock()
	c, ok := s.cache[id]
	s.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.aead, nil
	}
	aead, err := s.openKey(ctx, id)
	if errors.Is(err, ErrNoKey) {
		aead, err = s.createKey(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.cache) >= maxCache {
		clear(s.cache)
	}
	s.cache[id] = cachedKey{aead: aead, until: now.Add(s.cacheFor)}
	s.mu.Unlock()
	return aead, nil
}

// createKey creates a data key under id; when another writer created one
// first, that one is read and used.
func (s *Sealer) createKey(ctx context.Context, id string) (cipher.AEAD, error) {
	dk := make([]byte, 32)
	_, _ = rand.Read(dk)
	nonce := make([]byte, s.wrapKey.NonceSize())
	_, _ = rand.Read(nonce)
	wrapped := s.wrapKey.Seal(nonce, nonce, dk, []byte(id))
	err := s.keys.Create(ctx, id, wrapped)
	if errors.Is(err, ErrKeyExists) {
		return s.openKey(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("create actor key %s: %w", id, err)
	}
	return newGCM(dk), nil
}

// openKey reads and unwraps the data key under id.
func (s *Sealer) openKey(ctx context.Context, id string) (cipher.AEAD, error) {
	wrapped, err := s.keys.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read actor key %s: %w", id, err)
	}
	n := s.wrapKey.NonceSize()
	if len(wrapped) < n {
		return nil, fmt.Errorf("actor key %s: %d bytes stored: %w", id, len(wrapped), ErrWrongKey)
	}
	dk, err := s.wrapKey.Open(nil, wrapped[:n], wrapped[n:], []byte(id))
	if err != nil || len(dk) != 32 {
		return nil, fmt.Errorf("actor key %s: another --actor-key-file than the one that created it?: %w", id, ErrWrongKey)
	}
	return newGCM(dk), nil
}

// checkID is the key id of the key-file check: a data key no actor uses,
// created under the operator key the first time a key store is checked
// (a KeyID is a hex MAC and never has this form).
const checkID = "key-file-check"

// Check verifies that the operator key opens the key store's keys: it
// unwraps the check key, creating it in a store that has none. It answers
// ErrWrongKey when the store's keys were made with another key file, so a
// wrong --actor-key-file is refused at start instead of making new keys
// for every person and showing their earlier actors as ciphertext.
func (s *Sealer) Check(ctx context.Context) error {
	if s.keys == nil {
		return ErrNoKeyStore
	}
	_, err := s.openKey(ctx, checkID)
	if errors.Is(err, ErrNoKey) {
		_, err = s.createKey(ctx, checkID)
	}
	return err
}

// Sealed reports whether stored has the form of a sealed actor (hash or
// encrypt).
func Sealed(stored string) bool {
	return strings.HasPrefix(stored, HashPrefix) || strings.HasPrefix(stored, EncryptPrefix)
}

// Reveal returns the actor a stored value names. A plain value and a hash
// token come back as stored (a token cannot be reversed: compare it with
// Token of a known actor). An encrypted one is decrypted with its data
// key, read from the store on every call; a destroyed key (or one created
// anew after a destroy) gives ErrErased, for good.
func (s *Sealer) Reveal(ctx context.Context, stored string) (string, error) {
	return s.reveal(ctx, stored, s.openKey)
}

// Revealer reveals the actors of one read, such as a page of history: it
// reads each data key once for its lifetime instead of once per actor (an
// actor's every event is sealed with a fresh nonce, so the stored forms
// differ while the key is the same). Keep one only for one read: a forget
// is seen by the next Revealer, not by one already holding the key. Not
// safe for concurrent use.
type Revealer struct {
	s    *Sealer
	keys map[string]revealedKey
}

type revealedKey struct {
	aead cipher.AEAD
	err  error
}

// Revealer returns a Revealer over s.
func (s *Sealer) Revealer() *Revealer {
	return &Revealer{s: s, keys: map[string]revealedKey{}}
}

// Reveal is Sealer.Reveal, reading each key id at most once.
func (r *Revealer) Reveal(ctx context.Context, stored string) (string, error) {
	return r.s.reveal(ctx, stored, func(ctx context.Context, id string) (cipher.AEAD, error) {
		k, ok := r.keys[id]
		if !ok {
			k.aead, k.err = r.s.openKey(ctx, id)
			if ctx.Err() == nil { // a cancelled read is not the key's answer
				r.keys[id] = k
			}
		}
		return k.aead, k.err
	})
}

// reveal is Reveal with the data key of a key id read by open.
func (s *Sealer) reveal(ctx context.Context, stored string, open func(context.Context, string) (cipher.AEAD, error)) (string, error) {
	rest, ok := strings.CutPrefix(stored, EncryptPrefix)
	if !ok {
		return stored, nil
	}
	id, blob, ok := strings.Cut(rest, ":")
	if !ok || len(id) != 32 {
		return "", fmt.Errorf("reveal %.40q: %w", stored, ErrMalformed)
	}
	ct, err := base64.RawURLEncoding.DecodeString(blob)
	if err != nil || len(ct) < 12+16 {
		return "", fmt.Errorf("reveal %.40q: %w", stored, ErrMalformed)
	}
	if s.keys == nil || s.wrapKey == nil {
		return "", fmt.Errorf("reveal an encrypted actor: %w", ErrNoKeyStore)
	}
	aead, err := open(ctx, id)
	if errors.Is(err, ErrNoKey) {
		return "", fmt.Errorf("reveal: key %s destroyed: %w", id, ErrErased)
	}
	if err != nil {
		return "", fmt.Errorf("reveal: %w", err)
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, ct[:n], ct[n:], []byte(EncryptPrefix+id))
	if err != nil {
		// The key under id is not the one that sealed it: the person was
		// forgotten and wrote again under a new key.
		return "", fmt.Errorf("reveal: key %s was destroyed and made anew: %w", id, ErrErased)
	}
	return string(pt), nil
}

// Forget destroys actor's data key (encrypt mode's crypto-shredding):
// every event actor wrote reads back as erased, on every engine's next
// reveal. It returns the key id. An engine that cached the key for sealing
// may seal with it for up to CacheFor more; those events read back erased
// too. A later write by the same actor creates a new key.
func (s *Sealer) Forget(ctx context.Context, actor string) (string, error) {
	if s.keys == nil || s.idKey == nil {
		return "", fmt.Errorf("forget an actor: %w", ErrNoKeyStore)
	}
	id := s.KeyID(actor)
	if err := s.keys.Destroy(ctx, id); err != nil {
		return id, fmt.Errorf("forget: destroy key %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.cache, id)
	s.mu.Unlock()
	return id, nil
}
