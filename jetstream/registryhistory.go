package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// headerRegistryVersion names the registry version a history message holds.
const headerRegistryVersion = "Engine-Registry-Version"

// MaxRegistryBytes bounds one stored registry file.
const MaxRegistryBytes = 4 << 20

// ErrRegistryVersionUnknown means the registry history holds no registry of
// the version asked for.
var ErrRegistryVersionUnknown = errors.New("registry version not in the registry history")

// RegistryHistory keeps every registry version an engine on the stream has
// served, addressable by version and by time (R31, R25), in the stream
// <PREFIX>_REGISTRY_HISTORY: one subject per version
// (<prefix>.registry.history.<sha256 of the version>), each message one
// registry file with its version in a header. Versions are never removed
// (the stream has no age or size limit; a version keeps its last 8
// contents), so every version an open turn or a checkpoint names stays
// addressable: a frozen turn is rebuilt, and history resolves a past
// point, against the registry that was in force then. Registries are
// small and change rarely; the stream stays small.
//
// A RegistryHistory is safe for concurrent use.
type RegistryHistory struct {
	log      *Log
	stream   jetstream.Stream
	name     string
	subjBase string
}

// OpenRegistryHistory creates or opens the registry history stream.
func (l *Log) OpenRegistryHistory(ctx context.Context) (*RegistryHistory, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	h := &RegistryHistory{log: l, name: strings.ToUpper(l.cfg.Prefix) + "_REGISTRY_HISTORY", subjBase: l.cfg.Prefix + ".registry.history."}
	sc := jetstream.StreamConfig{
		Name:              h.name,
		Description:       "every registry version an engine served, one subject per version (R31)",
		Subjects:          []string{h.subjBase + "*"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          l.cfg.Replicas,
		MaxMsgsPerSubject: 8,
		MaxMsgSize:        MaxRegistryBytes + 4096,
		Discard:           jetstream.DiscardOld,
		DenyDelete:        !l.cfg.AllowDeletes,
		DenyPurge:         !l.cfg.AllowDeletes,
		AllowDirect:       true,
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
	m, err := h.stream.GetLastMsgForSubject(ctx, subj)
	if err == nil && string(m.Data) == string(data) {
		return nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("record registry %q: %w", version, err)
	}
	sum := sha256.Sum256(data)
	msg := nats.NewMsg(subj)
	msg.Data = data
	msg.Header.Set(headerRegistryVersion, version)
	msg.Header.Set(headerMsgID, "registry-"+hex.EncodeToString(sum[:]))
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
	m, err := h.stream.GetLastMsgForSubject(ctx, h.subject(version))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("registry %q: %w", version, ErrRegistryVersionUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	return m.Data, nil
}

// LookupAll returns every stored content of version, newest first (a
// version is normally stored once; a file re-pushed under the same version
// adds another content, and the caller picks the one whose contract it
// needs). The error matches ErrRegistryVersionUnknown when there is none.
func (h *RegistryHistory) LookupAll(ctx context.Context, version string) ([][]byte, error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	c, err := h.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.subject(version)}})
	if err != nil {
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("look up registry %q: %w", version, err)
	}
	var out [][]byte
	for n := info.NumPending; n > 0; n-- {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("look up registry %q: %w", version, err)
		}
		out = append([][]byte{m.Data()}, out...)
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
}

// Timeline returns every recorded version, oldest first, without the
// registry files (a headers-only read): the version in force at a time is
// the last one recorded at or before it.
func (h *RegistryHistory) Timeline(ctx context.Context) ([]RegistryMark, error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	info, err := h.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry timeline: %w", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	c, err := h.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("registry timeline: %w", err)
	}
	var out []RegistryMark
	for {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return out, fmt.Errorf("registry timeline: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return out, fmt.Errorf("registry timeline: %w", err)
		}
		out = append(out, RegistryMark{Version: m.Headers().Get(headerRegistryVersion), Time: md.Timestamp, Seq: md.Sequence.Stream})
		if md.Sequence.Stream >= last {
			return out, nil
		}
	}
}
