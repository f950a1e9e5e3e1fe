package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrDrift is matched (errors.Is) by the errors of CheckStream and
// CheckFeed: the event stream or the projection's consumer is missing or
// no longer configured as the engine made it. The engine must not report
// ready then: events could be dropped (limits), deleted (allow delete or
// purge, rollups, TTLs) or never reach the views (consumer filter,
// headers only, pause).
var ErrDrift = errors.New("configuration drifted")

// CheckStream verifies that the event stream exists and still has the
// configuration OpenLog gave it: subjects, storage, no limits on
// messages, bytes, age or messages per subject, deletes and purges
// denied, no rollups, message TTLs, counters or schedules, no mirror,
// sources, transforms or republish, not sealed, acknowledged, and the
// size, duplicate-window and direct-get settings. It names every
// difference.
func (l *Log) CheckStream(ctx context.Context) error {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	s, err := l.js.Stream(ctx, l.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s: %w: it no longer exists (deleted?): the log is gone from this server; restore it from a backup or a replica, then restart the engine", l.name, ErrDrift)
	}
	if err != nil {
		return fmt.Errorf("check stream %s: %w", l.name, err)
	}
	have, want := s.CachedInfo().Config, l.want
	var diffs []string
	diff := func(field string, got, exp any) {
		diffs = append(diffs, fmt.Sprintf("%s is %v, want %v", field, got, exp))
	}
	if !slices.Equal(have.Subjects, want.Subjects) {
		diff("subjects", have.Subjects, want.Subjects)
	}
	if have.Storage != want.Storage {
		diff("storage", have.Storage, want.Storage)
	}
	if have.Retention != jetstream.LimitsPolicy {
		diff("retention", have.Retention, jetstream.LimitsPolicy)
	}
	for _, lim := range []struct {
		name string
		v    int64
	}{{"max_msgs", have.MaxMsgs}, {"max_bytes", have.MaxBytes}, {"max_msgs_per_subject", have.MaxMsgsPerSubject}} {
		if lim.v > 0 {
			diff(lim.name, lim.v, "unlimited (-1)")
		}
	}
	if have.MaxAge != 0 {
		diff("max_age", have.MaxAge, "0 (unlimited)")
	}
	if have.MaxMsgSize != want.MaxMsgSize {
		diff("max_msg_size", have.MaxMsgSize, want.MaxMsgSize)
	}
	if have.Duplicates != want.Duplicates {
		diff("duplicate_window", have.Duplicates, want.Duplicates)
	}
	flags := []struct {
		name      string
		got, want bool
	}{
		{"deny_delete", have.DenyDelete, want.DenyDelete}, {"deny_purge", have.DenyPurge, want.DenyPurge},
		{"allow_direct", have.AllowDirect, true}, {"allow_atomic", have.AllowAtomicPublish, want.AllowAtomicPublish},
		{"no_ack", have.NoAck, false}, {"sealed", have.Sealed, false}, {"allow_rollup_hdrs", have.AllowRollup, false},
		{"allow_msg_ttl", have.AllowMsgTTL, false}, {"allow_msg_counter", have.AllowMsgCounter, false},
		{"allow_msg_schedules", have.AllowMsgSchedules, false}, {"discard_new_per_subject", have.DiscardNewPerSubject, false},
	}
	for _, f := range flags {
		if f.got != f.want {
			diff(f.name, f.got, f.want)
		}
	}
	if have.Mirror != nil || len(have.Sources) > 0 || have.SubjectTransform != nil || have.RePublish != nil {
		diffs = append(diffs, "it has a mirror, sources, a subject transform or republish, want none")
	}
	if have.PersistMode != want.PersistMode {
		diff("persist_mode", have.PersistMode, want.PersistMode)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("stream %s: %w: %s; an admin must restore it (engine stream repair)", l.name, ErrDrift, strings.Join(diffs, "; "))
	}
	return nil
}

// feedConsumerConfig is the consumer a durable feed runs on.
func (l *Log) feedConsumerConfig(cfg FeedConfig) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "engine projection feed",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: l.subjBase + "*",
		Replicas:      0,
	}
}

// CheckFeed verifies that a durable feed's consumer exists and still
// delivers every event, whole, in order, to the engine: deliver all,
// acknowledge all, the events filter, not headers only, no rate limit,
// instant replay, not paused. It names every difference.
func (l *Log) CheckFeed(ctx context.Context, durable string) error {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	c, err := l.js.Consumer(ctx, l.name, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("feed %s on %s: %w: the consumer no longer exists (deleted?): restart the engine to recreate it", durable, l.name, ErrDrift)
	}
	if err != nil {
		return fmt.Errorf("check feed %s: %w", durable, err)
	}
	have := c.CachedInfo().Config
	var diffs []string
	if have.DeliverPolicy != jetstream.DeliverAllPolicy {
		diffs = append(diffs, fmt.Sprintf("deliver_policy is %v, want all", have.DeliverPolicy))
	}
	if have.AckPolicy != jetstream.AckAllPolicy {
		diffs = append(diffs, fmt.Sprintf("ack_policy is %v, want all", have.AckPolicy))
	}
	if want := l.subjBase + "*"; have.FilterSubject != want || len(have.FilterSubjects) > 0 {
		diffs = append(diffs, fmt.Sprintf("filter is %q %v, want %q", have.FilterSubject, have.FilterSubjects, want))
	}
	if have.HeadersOnly {
		diffs = append(diffs, "headers_only is true, want false (events would reach the projection without a body)")
	}
	if have.RateLimit != 0 {
		diffs = append(diffs, fmt.Sprintf("rate_limit_bps is %d, want 0", have.RateLimit))
	}
	if have.ReplayPolicy != jetstream.ReplayInstantPolicy {
		diffs = append(diffs, fmt.Sprintf("replay_policy is %v, want instant", have.ReplayPolicy))
	}
	if have.PauseUntil != nil && have.PauseUntil.After(time.Now()) {
		diffs = append(diffs, fmt.Sprintf("paused until %s", have.PauseUntil.Format(time.RFC3339)))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("feed %s on %s: %w: %s; the engine restores it when the feed restarts (restart the engine), and deploy/accounts.conf keeps other users off it", durable, l.name, ErrDrift, strings.Join(diffs, "; "))
	}
	return nil
}

// RepairStream updates the event stream back to the configuration OpenLog
// gives it (keeping its storage and replicas), undoing the drift
// CheckStream reports. Only a user allowed to update streams (the admin)
// may.
func (l *Log) RepairStream(ctx context.Context) error {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	s, err := l.js.Stream(ctx, l.name)
	if err != nil {
		return fmt.Errorf("repair stream %s: %w", l.name, err)
	}
	sc := l.want
	have := s.CachedInfo().Config
	sc.Storage, sc.Replicas = have.Storage, have.Replicas
	sc.MaxMsgs, sc.MaxBytes, sc.MaxMsgsPerSubject = -1, -1, -1
	if _, err := l.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("repair stream %s: %w", l.name, err)
	}
	return l.CheckStream(ctx)
}
