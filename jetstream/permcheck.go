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

// ErrPublishRefused is matched by CheckPublish when the server's
// permissions refuse the connection a publish the engine needs.
var ErrPublishRefused = errors.New("the server refuses the engine's publish")

// probeTimeout bounds one CheckPublish probe.
const probeTimeout = 5 * time.Second

// CheckPublish asks whether the log's connection may publish to each of
// subjects, writing nothing: each probe expects a last stream sequence no
// stream has, so the stream holding the subject refuses it before it
// stores anything, and a subject no stream holds answers "no responders".
// A publish the server's permissions refuse gets no answer; the refusal
// reaches the connection as an error naming the subject, and ends that
// probe at once. It returns an error matching ErrPublishRefused that
// names every refused subject, or the first other failure (a probe
// unanswered under load: ask again).
func (l *Log) CheckPublish(ctx context.Context, subjects ...string) error {
	var refused []string
	for _, subj := range subjects {
		ok, err := l.probePublish(ctx, subj)
		if err != nil {
			return fmt.Errorf("probe a publish to %s: %w", subj, err)
		}
		if !ok {
			refused = append(refused, subj)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w to %s", ErrPublishRefused, strings.Join(refused, ", "))
	}
	return nil
}

// probePublish sends one probe to subj: true when a server answered it,
// false when the permissions refused it.
func (l *Log) probePublish(ctx context.Context, subj string) (bool, error) {
	msg := nats.NewMsg(subj)
	msg.Header.Set("Nats-Expected-Last-Sequence", strconv.FormatUint(math.MaxUint64, 10))
	before := l.nc.LastError()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.nc.RequestMsgWithContext(pctx, msg)
		done <- err
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil || errors.Is(err, nats.ErrNoResponders) {
				return true, nil
			}
			if refusedTo(l.nc.LastError(), before, subj) {
				return false, nil
			}
			return false, err
		case <-tick.C:
			if refusedTo(l.nc.LastError(), before, subj) {
				cancel()
				<-done
				return false, nil
			}
		}
	}
}

// refusedTo reports whether last, a connection's last error that was
// before earlier, is a permissions violation of a publish to subj.
func refusedTo(last, before error, subj string) bool {
	return last != nil && last != before && errors.Is(last, nats.ErrPermissionViolation) &&
		strings.Contains(last.Error(), fmt.Sprintf("Publish to %q", subj))
}
