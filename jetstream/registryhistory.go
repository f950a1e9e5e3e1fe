package jetstream

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// headerRegistryVersion names the registry version a history message holds.
const headerRegistryVersion = "Engine-Registry-Version"

// MaxRegistryBytes bounds one stored registry file: the embedded
// server's max_payload, about 10,000 MCP tools with their schemas.
const MaxRegistryBytes = EmbeddedMaxPayload

// ErrRegistryVersionUnknown means the registry history holds no registry of
// the version asked for.
var ErrRegistryVersionUnknown = errors.New("registry version not in the registry history")

// ErrRegistryVersionPruned means the version was recorded, and its
// content was pruned from the registry history: only its tombstone
// is left. Errors that match it match ErrRegistryVersionUnknown too.
var ErrRegistryVersionPruned = errors.New("registry version pruned")

// prunedErr is the error of a look-up of a pruned version.
func prunedErr(version string) error {
	return fmt.Errorf("registry %q: %w from the registry history (%w)", version, ErrRegistryVersionPruned, ErrRegistryVersionUnknown)
}

// RegistryHistory keeps the registry versions engines on the stream have
// served, addressable by version and by time, in the stream
// <PREFIX>_REGISTRY_HISTORY: one subject per version
// (<prefix>.registry.history.<sha256 of the version>), each message one
// registry file with its version in a header. The stream has no age or
// size limit (a version keeps its last 8 contents); a RegistryPruner
// (serve --registry-keep) removes the contents of old versions that
// no open turn and no checkpoint references, leaving a tombstone per
// pruned version that keeps its place in the timeline: a past point under
// a pruned version says so (ErrRegistryVersionPruned) instead of resolving
// against another version. Every version an open turn or a checkpoint
// names stays addressable: a frozen turn is rebuilt, and history resolves
// a past point, against the registry that was in force then.
//
// A RegistryHistory is safe for concurrent use.
type RegistryHistory struct {
	log      *Log
	stream   jetstream.Stream
	name     string
	subjBase string
	// purgeDenied: the stream was created with deny_purge (by an engine without erase),
	// which JetStream cannot lift: no version of it can be pruned.
	purgeDenied bool
}

// OpenRegistryHistory creates or opens the registry history stream.
func (l *Log) OpenRegistryHistory(ctx context.Context) (*RegistryHistory, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	h := &RegistryHistory{log: l, name: strings.ToUpper(l.cfg.Prefix) + "_REGISTRY_HISTORY", subjBase: l.cfg.Prefix + ".registry.history."}
	sc := jetstream.StreamConfig{
		Name:              h.name,
		Description:       "every registry version an engine served, one subject per version",
		Subjects:          []string{h.subjBase + "*"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          l.cfg.Replicas,
		MaxMsgsPerSubject: 8,
		MaxMsgSize:        MaxRegistryBytes + 4096,
		Discard:           jetstream.DiscardOld,
		DenyDelete:        !l.cfg.AllowDeletes,
		// Purge stays possible: a RegistryPruner purges a
		// pruned version's subject through the privileged connection;
		// the engine user and the channels may not purge.
		DenyPurge:   false,
		AllowDirect: true,
	}
	if l.cfg.MemoryStorage {
		sc.Storage = jetstream.MemoryStorage
	}
	stream, err := l.js.Stream(ctx, h.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = l.js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another engine created it meanwhile
			stream, err = l.js.Stream(ctx, h.name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open registry history %s: %w", h.name, err)
	}
	h.stream = stream
	h.purgeDenied = stream.CachedInfo().Config.DenyPurge
	return h, nil
}

// StreamName is the name of the history stream.
func (h *RegistryHistory) StreamName() string { return h.name }

// subject is the subject of a version: a hash, since a version may hold
// characters ('.') that a subject token may not.
func (h *RegistryHistory) subject(version string) string {
	sum := sha256.Sum256([]byte(version))
	return h.subjBase + hex.EncodeToString(sum[:20])
}

// Record stores data, a registry file of version version, unless the
// history's newest content of that version is already data. Recording the
// same file again is a no-op, so every engine records what it serves.
func (h *RegistryHistory) Record(ctx context.Context, version string, data []byte) error {
	if version == "" || len(data) == 0 || len(data) > MaxRegistryBytes {
		return fmt.Errorf("record registry %q: %d bytes, want 1 to %d and a version", version, len(data), MaxRegistryBytes)
	}
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	subj := h.subject(version)
	m, err := ask(ctx, h.log, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return h.stream.GetLastMsgForSubject(ctx, subj)
	})
	if err == nil && !isTombstone(m.Header) && string(m.Data) == string(data) {
		return nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("record registry %q: %w", version, err)
	}
	sum := sha256.Sum256(data)
	msg := nats.NewMsg(subj)
	msg.Data = data
	msg.Header.Set(headerRegistryVersion, version)
	id := "registry-" + hex.EncodeToString(sum[:])
	if err == nil && isTombstone(m.Header) {
		// A pruned version recorded again: not a duplicate of the
		// content the prune removed.
		id += fmt.Sprintf("-after-%d", m.Sequence)
	}
	msg.Header.Set(headerMsgID, id)
	if _, err := h.log.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(h.name)); err != nil {
		return fmt.Errorf("record registry %q: %w", version, err)
	}
	return nil
}

// Lookup returns the newest stored content of version; the error matches
// ErrRegistryVersionUnknown when there is none.
func (h *RegistryHistory) Lookup(ctx context.Context, version string) ([]byte, error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	var header nats.Header
	var data []byte
	m, err := ask(ctx, h.log, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return h.stream.GetLastMsgForSubject(ctx, h.subject(version))
	})
	switch {
	case err == nil:
		header, data = m.Header, m.Data
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// A replica behind the history's leader answers "none" for a
		// version recorded since; callers cache "unknown" (the fold then
		// judges without registry rules), so the leader decides.
		lm, lerr := h.log.leaderMsg(ctx, h.name, leaderGetRequest{LastBy: h.subject(version)})
		if errors.Is(lerr, ErrNotStored) {
			return nil, fmt.Errorf("registry %q: %w", version, ErrRegistryVersionUnknown)
		}
		if lerr != nil {
			return nil, fmt.Errorf("look up registry %q on the history's leader: %w", version, lerr)
		}
		header, data = lm.header, lm.data
	default:
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	if isTombstone(header) {
		return nil, prunedErr(version)
	}
	return data, nil
}

// LookupAll returns every stored content of version, newest first (a
// version is normally stored once; a file re-pushed under the same version
// adds another content, and the caller picks the one whose contract it
// needs). The error matches ErrRegistryVersionUnknown when there is none.
func (h *RegistryHistory) LookupAll(ctx context.Context, version string) ([][]byte, error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	var out [][]byte
	err := againUnserved(ctx, func() error {
		var err error
		out, err = h.lookupAll(ctx, version)
		return err
	})
	return out, err
}

// lookupAll is LookupAll's one read, through a consumer of its own.
func (h *RegistryHistory) lookupAll(ctx context.Context, version string) ([][]byte, error) {
	c, err := h.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.subject(version)}})
	if err != nil {
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	var out [][]byte
	pruned := false
	for n := info.NumPending; n > 0; n-- {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("look up registry %q: %w", version, err)
		}
		if isTombstone(m.Headers()) {
			pruned = true
			continue
		}
		out = append([][]byte{m.Data()}, out...)
	}
	if len(out) == 0 && pruned {
		return nil, prunedErr(version)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("registry %q: %w", version, ErrRegistryVersionUnknown)
	}
	return out, nil
}

// RegistryMark is one recorded registry version and when it was recorded.
type RegistryMark struct {
	Version string
	Time    time.Time
	Seq     uint64
	// Pruned reports that the content recorded here was pruned:
	// the mark comes from the version's tombstone, and a look-up of the
	// version answers ErrRegistryVersionPruned (unless it was recorded
	// again since).
	Pruned bool
}

// eachHeader reads every message of the history, oldest first, without
// the registry files (a headers-only read), and calls fn with each one's
// version, headers and metadata, once; what names the read in its errors.
// A read that "no responders" cuts short is read again from the start, and
// fn is not called again for what it was given.
func (h *RegistryHistory) eachHeader(ctx context.Context, what string, fn func(version string, hdr nats.Header, md *jetstream.MsgMetadata)) error {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	var given uint64 // the last sequence fn was given
	return againUnserved(ctx, func() error {
		return h.eachHeaderOnce(ctx, what, func(v string, hdr nats.Header, md *jetstream.MsgMetadata) {
			if md.Sequence.Stream > given {
				given = md.Sequence.Stream
				fn(v, hdr, md)
			}
		})
	})
}

// eachHeaderOnce is eachHeader's one read, through a consumer of its own.
func (h *RegistryHistory) eachHeaderOnce(ctx context.Context, what string, fn func(version string, hdr nats.Header, md *jetstream.MsgMetadata)) error {
	info, err := h.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	last := info.State.LastSeq
	c, err := h.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fn(m.Headers().Get(headerRegistryVersion), m.Headers(), md)
		if md.Sequence.Stream >= last {
			return nil
		}
	}
}

// Timeline returns every recorded version, oldest first (by the sequence
// it was recorded at), without the registry files (a headers-only read):
// the version in force at a time is the last one recorded at or before
// it. A pruned version keeps its marks, from its tombstone.
func (h *RegistryHistory) Timeline(ctx context.Context) ([]RegistryMark, error) {
	var out []RegistryMark
	seen := make(map[uint64]bool)
	err := h.eachHeader(ctx, "registry timeline", func(v string, hdr nats.Header, md *jetstream.MsgMetadata) {
		if isTombstone(hdr) {
			for _, mk := range tombstoneMarks(hdr) {
				mk.Version = v
				out = append(out, mk)
			}
		} else {
			out = append(out, RegistryMark{Version: v, Time: md.Timestamp, Seq: md.Sequence.Stream})
		}
	})
	if err != nil {
		return out, err
	}
	// A tombstone may repeat marks of contents not purged yet (a prune
	// in progress): each recorded sequence counts once, content first.
	slices.SortStableFunc(out, func(a, b RegistryMark) int { return cmp.Compare(a.Seq, b.Seq) })
	kept := out[:0]
	for _, mk := range out {
		if !seen[mk.Seq] {
			seen[mk.Seq] = true
			kept = append(kept, mk)
		}
	}
	return kept, nil
}
