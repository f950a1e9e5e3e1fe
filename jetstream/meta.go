package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// ErrDamagedLog is matched (errors.Is) when the event stream holds less
// than the projection has already folded (a damaged or truncated store),
// or a sequence the projection must fold cannot be read: acknowledged
// events are gone, and the engine must say so instead of serving.
var ErrDamagedLog = errors.New("damaged log")

// ErrLeaseHeld is returned by Meta.Acquire when another owner holds a
// live lease.
var ErrLeaseHeld = errors.New("lease held by another owner")

// ErrLeaseUnknown is returned by Meta.Acquire when its write was sent and
// no answer came (a timeout, a lost connection): the write may have been
// stored, and the owner may hold the lease. An owner that stops gives it
// up with Meta.ReleaseOwner.
var ErrLeaseUnknown = errors.New("the lease write's outcome is unknown")

// Meta is the projection's own bucket <PREFIX>_PROJECTION: the watermark
// (the highest stream sequence folded into the views), a sticky record of
// detected log damage, and the projection runner's lease. It is a bucket
// of its own, apart from the views, so that damage to one leaves the
// other.
type Meta struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
}

// Keys of the meta bucket.
const (
	metaWatermark = "watermark"
	metaDamaged   = "damaged"
	metaRunner    = "runner"
)

// OpenMeta creates or opens the projection's meta bucket, one per
// partition of a partitioned layout.
func (l *Log) OpenMeta(ctx context.Context) (*Meta, error) {
	bucket := strings.ToUpper(l.cfg.Prefix) + "_PROJECTION" + l.cfg.partitionSuffix()
	kv, err := l.openBucket(ctx, bucket, "engine projection: watermark, log damage, runner lease")
	if err != nil {
		return nil, fmt.Errorf("open projection bucket %s: %w", bucket, err)
	}
	return &Meta{log: l, kv: kv, bucket: bucket}, nil
}

// openBucket opens the KV bucket, creating it (one value of history, the
// log's replicas and storage) when it does not exist.
func (l *Log) openBucket(ctx context.Context, bucket, description string) (jetstream.KeyValue, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	cfg := jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		History:     1,
		Replicas:    l.cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}
	if l.cfg.MemoryStorage {
		cfg.Storage = jetstream.MemoryStorage
	}
	kv, err := l.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(ctx, cfg)
	}
	return kv, err
}

// openSharedBucket is openBucket for a bucket engines create on first use:
// one that loses the race to create it opens the bucket the other made.
func (l *Log) openSharedBucket(ctx context.Context, bucket, description string) (jetstream.KeyValue, error) {
	kv, err := l.openBucket(ctx, bucket, description)
	if errors.Is(err, jetstream.ErrBucketExists) { // another engine created it meanwhile
		kv, err = l.js.KeyValue(ctx, bucket)
	}
	return kv, err
}

// getEntry reads key from kv within the log's timeout; a missing key is a
// nil entry and no error. The read is asked again when a reconnect or a
// silent replica leaves it unanswered (ask): a direct get answered
// by a replica that is cut off or dies after taking the request is never
// answered, and the caller (the projection's view reads, say) would wait
// out its whole deadline (writers on the majority stalled 30 s after the
// stream leader was partitioned).
func (l *Log) getEntry(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	e, err := ask(ctx, l, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return kv.Get(ctx, key)
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	return e, err
}

// purgeKey purges key in kv (a purge marker replaces its revisions). The
// purge is made at the key's last revision, read from the bucket's leader,
// and asked again as getEntry's reads are: a second copy of it, or one
// that reaches the server after someone made the key anew, is refused
// rather than purging the new key. A key that was never written is no
// error.
func (l *Log) purgeKey(ctx context.Context, kv jetstream.KeyValue, key string) error {
	_, rev, err := l.leaderKV(ctx, kv.Bucket(), key)
	if err != nil || rev == 0 {
		return err
	}
	_, err = ask(ctx, l, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, kv.Purge(ctx, key, jetstream.LastRevision(rev))
	})
	if IsCASConflict(err) {
		return nil // a later revision: this purge stored, or the key made anew after it
	}
	return err
}

// Bucket is the bucket's name.
func (m *Meta) Bucket() string { return m.bucket }

func (m *Meta) get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := m.log.getEntry(ctx, m.kv, key)
	if err != nil {
		return nil, 0, fmt.Errorf("get %s/%s: %w", m.bucket, key, err)
	}
	return entryValue(e)
}

// Watermark is the highest stream sequence the projection has folded into
// the views, and the views bucket's stream sequence after those views
// were written (0, 0 when none is recorded).
func (m *Meta) Watermark(ctx context.Context) (folded, viewsSeq uint64, err error) {
	v, _, err := m.get(ctx, metaWatermark)
	if err != nil || v == nil {
		return 0, 0, err
	}
	a, b, _ := strings.Cut(string(v), " ")
	folded, err = strconv.ParseUint(a, 10, 64)
	if err == nil && b != "" {
		viewsSeq, err = strconv.ParseUint(b, 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("watermark in %s is %q: %w", m.bucket, v, err)
	}
	return folded, viewsSeq, nil
}

// SetWatermark records folded as the highest folded sequence and viewsSeq
// as the views bucket's sequence once its views are stored.
func (m *Meta) SetWatermark(ctx context.Context, folded, viewsSeq uint64) error {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	val := strconv.FormatUint(folded, 10) + " " + strconv.FormatUint(viewsSeq, 10)
	if _, err := m.kv.Put(ctx, metaWatermark, []byte(val)); err != nil {
		return fmt.Errorf("put watermark: %w", err)
	}
	return nil
}

// Damage returns the recorded log damage ("" when none).
func (m *Meta) Damage(ctx context.Context) (string, error) {
	v, _, err := m.get(ctx, metaDamaged)
	return string(v), err
}

// metaProbe is the key ProbeWrite writes.
const metaProbe = "probe"

// ProbeWrite stores one small value in the meta bucket: whether the store
// takes a write now (a full disk, or a store that refuses writes, answers
// with an error), whatever the free-space guard says.
func (m *Meta) ProbeWrite(ctx context.Context) error {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	if _, err := m.kv.Put(ctx, metaProbe, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("write to bucket %s: %w", m.bucket, err)
	}
	return nil
}

// SetDamage records log damage: it stays recorded, across restarts, until
// ClearDamage (engine rebuild).
func (m *Meta) SetDamage(ctx context.Context, msg string) error {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	if _, err := m.kv.Put(ctx, metaDamaged, []byte(msg)); err != nil {
		return fmt.Errorf("record log damage: %w", err)
	}
	return nil
}

// ClearDamage forgets recorded damage and the watermark (a rebuild that
// folds the log as it now is).
func (m *Meta) ClearDamage(ctx context.Context) error {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	for _, k := range []string{metaDamaged, metaWatermark} {
		if err := m.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("clear %s: %w", k, err)
		}
	}
	return nil
}

// Lease is a held runner lease.
type Lease struct {
	Owner    string
	Revision uint64
	Expires  time.Time
}

// leaseValue is "<owner> <unix-nanos expiry>".
func leaseValue(owner string, exp time.Time) []byte {
	return []byte(owner + " " + strconv.FormatInt(exp.UnixNano(), 10))
}

// parseLease splits a lease value at its last space: an owner name may
// hold spaces (an embedded engine's owner names its data directory), the
// expiry never does.
func parseLease(v []byte, rev uint64) Lease {
	s := string(v)
	owner, exp := s, ""
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		owner, exp = s[:i], s[i+1:]
	}
	n, _ := strconv.ParseInt(exp, 10, 64)
	return Lease{Owner: owner, Revision: rev, Expires: time.Unix(0, n)}
}

// Acquire takes the runner lease for owner for ttl when nobody holds a
// live one (or owner does), with compare-and-set on the key's revision
// so that two engines cannot both win. It returns ErrLeaseHeld (wrapped,
// naming the holder) when another owner's lease has not expired or
// another write took it first, and ErrLeaseUnknown when its write was
// not answered.
func (m *Meta) Acquire(ctx context.Context, owner string, ttl time.Duration) (Lease, error) {
	v, rev, err := m.get(ctx, metaRunner)
	if err != nil {
		return Lease{}, err
	}
	now := time.Now()
	if v != nil {
		cur := parseLease(v, rev)
		if cur.Owner != owner && now.Before(cur.Expires) {
			return cur, fmt.Errorf("%w: %s until %s", ErrLeaseHeld, cur.Owner, cur.Expires.Format(time.RFC3339Nano))
		}
	}
	exp := now.Add(ttl)
	// The write, once sent, is waited for even when ctx ends meanwhile: a
	// runner stopped mid-acquire then knows it holds the lease, and gives
	// it up, rather than leave it held until it expires.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.log.cfg.Timeout)
	defer cancel()
	var nrev uint64
	if v == nil {
		nrev, err = m.kv.Create(ctx, metaRunner, leaseValue(owner, exp))
	} else {
		nrev, err = m.kv.Update(ctx, metaRunner, leaseValue(owner, exp), rev)
	}
	switch {
	case IsCASConflict(err) || errors.Is(err, jetstream.ErrKeyExists):
		return Lease{}, fmt.Errorf("%w: lost the race for the lease: %w", ErrLeaseHeld, err)
	case err != nil:
		return Lease{}, fmt.Errorf("%w: write the lease: %w", ErrLeaseUnknown, err)
	}
	return Lease{Owner: owner, Revision: nrev, Expires: exp}, nil
}

// Renew extends a held lease (compare-and-set on its revision); an error
// means the lease is lost (someone else took it after it expired).
func (m *Meta) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	exp := time.Now().Add(ttl)
	rev, err := m.kv.Update(ctx, metaRunner, leaseValue(l.Owner, exp), l.Revision)
	if err != nil {
		return l, fmt.Errorf("renew lease: %w", err)
	}
	return Lease{Owner: l.Owner, Revision: rev, Expires: exp}, nil
}

// Release gives a held lease up, so that another engine takes over at
// once instead of after its expiry.
func (m *Meta) Release(ctx context.Context, l Lease) error {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	_, err := m.kv.Update(ctx, metaRunner, leaseValue("", time.Time{}), l.Revision)
	return err
}

// ReleaseOwner gives the runner lease up if owner holds it, at whatever
// revision it now has, and reports whether it released one. A stopping
// runner's last lease write (an acquire or a renewal that a stop or a
// timeout cut short) may have reached the server without its reply, at a
// revision the runner never learnt, or may still be on its way: the
// server can answer a read before it stores a write sent earlier. So the
// lease is read from the bucket's leader (a replica behind it could
// answer with an older lease or none), and a release refused at the
// revision read reads again, while ctx lasts. A lease read as free or
// expired is written free again at that revision: the connection's
// earlier writes land before that one, so when it is stored, none of
// them took the lease. Another owner's live lease is left alone: a write
// of owner's on its way was made at an older revision, and is refused.
func (m *Meta) ReleaseOwner(ctx context.Context, owner string) (bool, error) {
	ctx, cancel := m.log.withTimeout(ctx)
	defer cancel()
	for {
		v, rev, err := m.log.leaderKV(ctx, m.bucket, metaRunner)
		if err != nil {
			// An election under way: read again while ctx lasts.
			if Transient(err) && logport.Sleep(ctx, 20*time.Millisecond) == nil {
				continue
			}
			return false, err
		}
		cur := parseLease(v, rev)
		switch {
		case v != nil && cur.Owner == owner:
			if err = m.Release(ctx, cur); err == nil {
				return true, nil
			}
		case v != nil && cur.Owner != "" && time.Now().Before(cur.Expires):
			return false, nil
		default:
			if err = m.Release(ctx, cur); err == nil {
				return false, nil
			}
		}
		if serr := logport.Sleep(ctx, 20*time.Millisecond); serr != nil {
			return false, fmt.Errorf("release the lease of %s: %w", owner, err)
		}
	}
}

// LastSeqRange reports the stream's first and last sequence and its
// message count.
func (l *Log) LastSeqRange(ctx context.Context) (first, last, msgs uint64, err error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	info, err := l.streamInfo(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("stream info %s: %w", l.name, err)
	}
	return info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, nil
}
