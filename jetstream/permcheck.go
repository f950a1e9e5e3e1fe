package jetstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrPublishRefused is matched when the server's permissions refuse the
// connection a publish the engine needs (CheckPublish, and the layout
// record of OpenPartitions and ClaimLayout).
var ErrPublishRefused = errors.New("the server refuses the engine's publish")

// probeTimeout bounds one CheckPublish probe.
const probeTimeout = 5 * time.Second

// PublishSubjects are subjects an engine serving cfg's layout publishes
// to, one of each kind per partition (or for the one stream): a session
// subject of its event stream, and a key of its views bucket (named
// views, as projection.Config.Bucket), projection bucket and history
// bucket. CheckPublish probes them.
func (c LogConfig) PublishSubjects(views string) []string {
	c = c.withDefaults()
	var out []string
	for p := range c.Partitions {
		pc := c
		pc.Partition = p
		kv := "$KV." + strings.ToUpper(c.Prefix) + "_"
		sfx := pc.partitionSuffix() + ".permission-probe"
		out = append(out, pc.subjectBase()+"permission-probe", kv+views+sfx, kv+"PROJECTION"+sfx, kv+"HISTORY"+sfx)
	}
	return out
}

// CheckPublish asks whether nc may publish to each of subjects, writing
// nothing and needing no stream: each probe expects a last stream
// sequence no stream has, so a stream holding the subject refuses it
// before it stores anything, and a subject no stream holds answers "no
// responders". A publish the server's permissions refuse gets no answer;
// the refusal reaches the connection as an error naming the subject, and
// ends that probe at once. Every subject is probed. The result matches
// ErrPublishRefused and names every refused subject when there is one;
// otherwise it is the first other failure (a probe unanswered under
// load: ask again), or nil.
func CheckPublish(ctx context.Context, nc *nats.Conn, subjects ...string) error {
	var refused []string
	var failed error
	for _, subj := range subjects {
		msg := nats.NewMsg(subj)
		msg.Header.Set("Nats-Expected-Last-Sequence", strconv.FormatUint(math.MaxUint64, 10))
		err := WatchRefusal(ctx, nc, subj, func(ctx context.Context) error {
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			_, err := nc.RequestMsgWithContext(pctx, msg)
			if errors.Is(err, nats.ErrNoResponders) {
				return nil // allowed, and no stream holds it yet
			}
			return err
		})
		switch {
		case errors.Is(err, ErrPublishRefused):
			refused = append(refused, subj)
		case err != nil && failed == nil:
			failed = fmt.Errorf("probe a publish to %s: %w", subj, err)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w to %s", ErrPublishRefused, strings.Join(refused, ", "))
	}
	return failed
}

// WatchRefusal runs fn, and ends it early (its context cancelled) when
// the server refuses nc a publish to subj meanwhile (any publish when subj
// is ""): a refused publish or API request is never answered, so fn would
// only time out. It then returns an error matching ErrPublishRefused with
// the server's words; otherwise fn's result, unless the refusal came as
// fn failed.
func WatchRefusal(ctx context.Context, nc *nats.Conn, subj string, fn func(ctx context.Context) error) error {
	before := nc.LastError()
	refused := func() error {
		last := nc.LastError()
		if last == nil || last == before || !errors.Is(last, nats.ErrPermissionViolation) {
			return nil
		}
		if subj == "" {
			return fmt.Errorf("%w: %v", ErrPublishRefused, last)
		}
		if !strings.Contains(last.Error(), fmt.Sprintf("Publish to %q", subj)) {
			return nil
		}
		return fmt.Errorf("%w to %s: %v", ErrPublishRefused, subj, last)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if r := refused(); err != nil && r != nil {
				return r
			}
			return err
		case <-tick.C:
			if r := refused(); r != nil {
				cancel()
				<-done
				return r
			}
		}
	}
}
