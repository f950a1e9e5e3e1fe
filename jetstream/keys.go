package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/logport"
)

// KeyMismatchError names the key, the commands it was first used with and
// the commands sent now (their types: the digest says they differ, the
// types say how).
type KeyMismatchError struct {
	Key string
	// Was and Now are the command types of the first request and of this
	// one, comma-separated ("" for an entry that did not record them).
	Was, Now string
}

func (e *KeyMismatchError) Error() string {
	was := e.Was
	if was == "" {
		was = "other commands"
	}
	return fmt.Sprintf("idempotency key %q was first used with other commands (%s); this request sends %s: a retry must send the same commands in the same order; use a new key for new commands", e.Key, was, e.Now)
}

// Is makes errors.Is(err, ErrKeyMismatch) and errors.Is(err, ErrKeyInUse)
// true.
func (e *KeyMismatchError) Is(target error) bool {
	return target == logport.ErrKeyMismatch || target == logport.ErrKeyInUse
}

// keyIDDomain separates the hash of KeyEventIDs from any other use of
// SHA-256 over the same strings.
const keyIDDomain = "toolintent/engine idempotency key v1\x00"

// KeyEventIDs returns the ids of the n events an append with idempotency
// key key stores on session: the first is the first 16 bytes
// of SHA-256("toolintent/engine idempotency key v1" 0x00 session 0x00 key)
// written as a ULID (26 characters of Crockford base32; its time field is
// hash bits, not a time), the next ones that number plus 1, 2, ... as a
// 128-bit number. The same session and key always give the same ids; a
// key on another session gives other ids. wire.IdempotencyEventIDs is the
// same function for clients.
func KeyEventIDs(session, key string, n int) []string {
	sum := sha256.Sum256([]byte(keyIDDomain + session + "\x00" + key))
	var id ulid.ULID
	copy(id[:], sum[:16])
	return idsFrom(id, n)
}

// LegacyKeyEventIDs are the ids of the n events an engine stored
// under a ULID key: the key itself, then key+1, key+2, ... ok is false when
// key is not a ULID (no such events can exist).
func LegacyKeyEventIDs(key string, n int) (ids []string, ok bool) {
	id, err := ulid.ParseStrict(key)
	if err != nil {
		return nil, false
	}
	return idsFrom(id, n), true
}

// NextEventID is id plus 1 as a 128-bit number ("" when id is not a
// ULID): the id of the event after id in a keyed append.
func NextEventID(id string) string {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return ""
	}
	return idsFrom(u, 2)[1]
}

func idsFrom(id ulid.ULID, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = id.String()
		for b := len(id) - 1; b >= 0; b-- { // id + 1
			id[b]++
			if id[b] != 0 {
				break
			}
		}
	}
	return out
}

// CommandsDigest is the digest a claim records of an append's commands
// (each encoded, in order): a retry with other commands differs.
func CommandsDigest(encoded [][]byte) string {
	h := sha256.New()
	for _, c := range encoded {
		fmt.Fprintf(h, "%d:", len(c))
		h.Write(c)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// indexKey is the bucket entry of an idempotency key: a canonical ULID
// (the only keys) is its own entry, so claims made by older
// engines are found; any other key is "h." and the hex SHA-256 of the
// key, which fits the bucket's key alphabet whatever the key holds.
func indexKey(key string) string {
	if id, err := ulid.ParseStrict(key); err == nil && id.String() == key {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "h." + hex.EncodeToString(sum[:])
}

// Keys is the idempotency-key index: one KV entry per key, claimed with a
// create (atomic across engines), so a look-up costs one get, whatever the
// session's length.
type Keys struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
	// Keys whose ULID time is before legacyTime may have been stored by an
	// engine that kept no index: they are searched in the session's events
	// up to legacyUpTo (0: the stream was empty when the index began).
	legacyUpTo uint64
	legacyTime time.Time
}

// keysLegacy is the entry recording where the index began: the events
// stream's last sequence and the time when the bucket was created. It is
// neither a ULID nor "h." and a hash (indexKey), so no key can collide
// with it.
const keysLegacy = "index-began"

type keysBegan struct {
	UpTo uint64    `json:"up_to"`
	Time time.Time `json:"time"`
}

// keysOnce opens the keys bucket on first use: only keyed appends need
// it, and users that open the log for reading only may not create it.
type keysOnce struct {
	mu   sync.Mutex
	keys *Keys
}

// Keys opens (creating it on first use) the idempotency-key index.
func (l *Log) Keys(ctx context.Context) (*Keys, error) {
	l.keys.mu.Lock()
	defer l.keys.mu.Unlock()
	if l.keys.keys != nil {
		return l.keys.keys, nil
	}
	bucket := strings.ToUpper(l.cfg.Prefix) + "_KEYS"
	kv, err := l.openBucket(ctx, bucket, "engine idempotency keys: the session and sequences of each keyed append")
	if err != nil {
		return nil, fmt.Errorf("open idempotency key bucket %s: %w", bucket, err)
	}
	k := &Keys{log: l, kv: kv, bucket: bucket}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	began, err := k.began(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", bucket, keysLegacy, err)
	}
	var b keysBegan
	if err := json.Unmarshal(began, &b); err != nil {
		return nil, fmt.Errorf("read %s/%s: %q: %w", bucket, keysLegacy, began, err)
	}
	k.legacyUpTo, k.legacyTime = b.UpTo, b.Time
	l.keys.keys = k
	return k, nil
}

// began returns the record of when the index began (keysBegan as JSON),
// writing it if the bucket holds none. A bucket just created may not be
// served by any replica yet, and a replica behind the leader may not hold
// the record another engine wrote: the record is read with getEntry, which
// asks again, and, when it is there already, from the bucket's leader.
func (k *Keys) began(ctx context.Context) ([]byte, error) {
	e, err := k.log.getEntry(ctx, k.kv, keysLegacy)
	if err != nil {
		return nil, err
	}
	if e != nil {
		return e.Value(), nil
	}
	// Engines that kept no key index wrote one stream: a partitioned
	// layout has no keys from before the index.
	var last uint64
	if k.log.cfg.Partitions <= 1 {
		if last, err = k.log.LastStreamSeq(ctx); err != nil {
			return nil, err
		}
	}
	v, _ := json.Marshal(keysBegan{UpTo: last, Time: time.Now().UTC()})
	_, err = k.kv.Create(ctx, keysLegacy, v)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Another engine began it meanwhile.
		v, _, err = k.log.leaderKV(ctx, k.bucket, keysLegacy)
	}
	return v, err
}

// Bucket is the bucket's name.
func (k *Keys) Bucket() string { return k.bucket }

// Legacy returns the last sequence an index-less engine may have stored a
// key of time t at (0 when none can have been).
func (k *Keys) Legacy(t time.Time) uint64 {
	if k.legacyUpTo == 0 || t.After(k.legacyTime) {
		return 0
	}
	return k.legacyUpTo
}

// Claim claims key for c.Session. When the key is claimed already, it
// returns the existing claim and claimed false; the caller decides (another
// session: refuse; this one: look where the events are).
func (k *Keys) Claim(ctx context.Context, key string, c logport.KeyClaim) (got logport.KeyClaim, claimed bool, err error) {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	v, _ := json.Marshal(c)
	for range 3 {
		rev, err := k.kv.Create(ctx, indexKey(key), v)
		if err == nil {
			c.Rev = rev
			return c, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return got, false, fmt.Errorf("claim idempotency key %s: %w", key, err)
		}
		var found bool
		if got, found, err = k.Get(ctx, key); err != nil || found {
			return got, false, err
		}
		// Released between the create and the get: claim it again.
	}
	return got, false, fmt.Errorf("claim idempotency key %s: released and claimed again repeatedly", key)
}

// Get returns the claim of key; found is false when there is none.
func (k *Keys) Get(ctx context.Context, key string) (c logport.KeyClaim, found bool, err error) {
	e, err := k.log.getEntry(ctx, k.kv, indexKey(key))
	if err != nil {
		return c, false, fmt.Errorf("get idempotency key %s: %w", key, err)
	}
	if e == nil {
		return c, false, nil
	}
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.Session == "" {
		return c, false, fmt.Errorf("idempotency key %s: damaged index entry %q in %s (%v)", key, e.Value(), k.bucket, err)
	}
	c.Rev = e.Revision()
	return c, true, nil
}

// Settle records where the claimed key's events are (first, count). A
// settled claim is final. When the claim changed since c was read (a twin
// call settled or released it), Settle reads it again: settled for the
// session already, it is done; pending, it settles it; gone, it claims
// the key settled.
func (k *Keys) Settle(ctx context.Context, key string, c logport.KeyClaim, first uint64, count int) error {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	session := c.Session
	for range 3 {
		c.First, c.Count = first, count
		v, _ := json.Marshal(c)
		var err error
		if c.Rev == 0 {
			_, err = k.kv.Create(ctx, indexKey(key), v)
		} else {
			_, err = k.kv.Update(ctx, indexKey(key), v, c.Rev)
		}
		if err == nil {
			return nil
		}
		var found bool
		c, found, err = k.Get(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("settle idempotency key %s at %d: %w", key, first, err)
		case !found:
			c = logport.KeyClaim{Session: session}
		case c.Session != session:
			return fmt.Errorf("settle idempotency key %s at %d: %w", key, first, &logport.KeyInUseError{Key: key, Session: session})
		case !c.Pending():
			return nil
		}
	}
	return fmt.Errorf("settle idempotency key %s at %d: the claim keeps changing", key, first)
}

// Advance moves a pending claim's After to after: a search read the
// session up to it and found nothing of the key, so later searches start
// there (a replica that answers holds every message of the stream up to
// the last it returned). It does nothing when the claim changed meanwhile.
func (k *Keys) Advance(ctx context.Context, key string, c logport.KeyClaim, after uint64) error {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	if !c.Pending() || after <= c.After {
		return nil
	}
	c.After = after
	v, _ := json.Marshal(c)
	if _, err := k.kv.Update(ctx, indexKey(key), v, c.Rev); err != nil {
		return fmt.Errorf("advance idempotency key %s to %d: %w", key, after, err)
	}
	return nil
}

// Release drops a pending claim whose append certainly stored nothing (it
// was refused), so that the key is free again. It does nothing when the
// claim changed meanwhile.
func (k *Keys) Release(ctx context.Context, key string, c logport.KeyClaim) error {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	if err := k.kv.Delete(ctx, indexKey(key), jetstream.LastRevision(c.Rev)); err != nil {
		return fmt.Errorf("release idempotency key %s: %w", key, err)
	}
	return nil
}

// StoredAt reports whether the messages at sequences first, first+1, ...
// are the events ids, in order, on the session's subject: one direct get
// per id. A message on another subject, or with another id, is not. A
// sequence the replica answering the direct get does not hold is asked of
// the stream leader (a replica may lag the leader that named the
// sequence); one the leader cannot read either is an error, not an answer.
func (l *Log) StoredAt(ctx context.Context, session string, first uint64, ids []string) (bool, error) {
	if err := l.checkSession(session); err != nil {
		return false, fmt.Errorf("events of %q at %d: %w", session, first, err)
	}
	subj := l.Subject(session)
	for i, id := range ids {
		seq := first + uint64(i)
		subject, msgID, err := l.idAt(ctx, seq)
		if err != nil {
			return false, fmt.Errorf("read event %s at sequence %d: %w", id, seq, err)
		}
		if subject != subj || msgID != id {
			return false, nil
		}
	}
	return true, nil
}

// idAt returns the subject and Nats-Msg-Id of the message at seq: a direct
// get, or the stream leader's read when the replica that answered the
// direct get holds nothing there. On a replicated stream a follower applies
// an entry after the leader acknowledged it, so a writer told "duplicate,
// stored at seq" (the leader checks ids before the expected sequence) can
// ask a follower that does not have seq yet: that is no answer.
func (l *Log) idAt(ctx context.Context, seq uint64) (subject, msgID string, err error) {
	m, err := l.msgAt(ctx, seq)
	if err == nil {
		return m.Subject, m.Header.Get(headerMsgID), nil
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", "", err
	}
	r, lerr := l.ReadLeader(ctx, seq)
	if lerr != nil {
		return "", "", fmt.Errorf("%w; %w", err, lerr)
	}
	return r.Subject, r.MsgID, nil
}

// msgAt reads the message at seq by a direct get (asked again after a
// reconnect or a silent replica).
func (l *Log) msgAt(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := ask(ctx, l, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return l.stream.GetMsg(ctx, seq)
	})
	if err == nil {
		l.msgsRead.Add(1)
	}
	return m, err
}

// ForgetSession purges every idempotency key claimed for session (an
// erased session keeps no trace in the index), reading each entry of the
// index once; it returns how many it purged. A key forgotten may be
// claimed again, by any session.
func (k *Keys) ForgetSession(ctx context.Context, session string) (int, error) {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	w, err := k.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return 0, fmt.Errorf("forget idempotency keys of %q: %w", session, err)
	}
	defer func() { _ = w.Stop() }()
	var doomed []string
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return 0, fmt.Errorf("forget idempotency keys of %q: %w", session, ctx.Err())
		}
		if e == nil {
			break // the initial values are all delivered
		}
		if e.Key() == keysLegacy {
			continue
		}
		var c logport.KeyClaim
		if json.Unmarshal(e.Value(), &c) == nil && c.Session == session {
			doomed = append(doomed, e.Key())
		}
	}
	for _, key := range doomed {
		if err := k.log.purgeKey(ctx, k.kv, key); err != nil {
			return 0, fmt.Errorf("forget idempotency key entry %s of %q: %w", key, session, err)
		}
	}
	return len(doomed), nil
}

// HasKeys reports whether the idempotency-key bucket exists (a keyed
// append made it), without creating it: an erase forgets a session's keys
// only where there can be some, and creating the bucket (with the log's
// replicas) must not be what an erase waits for.
func (l *Log) HasKeys(ctx context.Context) (bool, error) {
	l.keys.mu.Lock()
	opened := l.keys.keys != nil
	l.keys.mu.Unlock()
	if opened {
		return true, nil
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	_, err := ask(ctx, l, func(ctx context.Context) (jetstream.KeyValue, error) {
		return l.js.KeyValue(ctx, strings.ToUpper(l.cfg.Prefix)+"_KEYS")
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up the idempotency key bucket: %w", err)
	}
	return true, nil
}
