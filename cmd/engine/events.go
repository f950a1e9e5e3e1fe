package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// eventFlags are shared by events and tail: how to reach the stream.
// Without --nats they dial the embedded server of a local engine serve at
// --listen, which follows serve's own ENGINE_LISTEN.
type eventFlags struct {
	clientNATSFlags
	Listen string `name:"listen" env:"ENGINE_LISTEN" default:"127.0.0.1:4222" help:"host:port of a local engine serve's embedded NATS server (serve --listen), dialled when --nats is not given."`
	Prefix string `name:"prefix" env:"ENGINE_PREFIX" default:"tools" help:"Subject prefix of the stream (engine serve --prefix)."`
	From   uint64 `name:"from" help:"Start at this stream sequence (default: events: the first event; tail: only new events)."`
}

// eventsCmd prints one session's events decoded, as JSON lines.
type eventsCmd struct {
	eventFlags
	Session string `arg:"" help:"Session id."`
	Follow  bool   `name:"follow" short:"f" help:"Keep printing new events as they are appended (Ctrl-C stops)."`
}

// tailCmd prints every session's new events, decoded, as JSON lines:
// only events appended after it starts, unless --last or --from asks for
// some of the history first.
type tailCmd struct {
	eventFlags
	Last uint64 `name:"last" short:"n" default:"0" help:"Print the stream's last N events first, then the new ones (default 0: only events appended from now on); --from SEQ starts at a sequence instead."`
}

// eventLine is one event as printed: the envelope's fields, data as the
// payload's fields (docs/wire-format.md), or error for an event the
// engine cannot decode.
type eventLine struct {
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Stored  string          `json:"stored"`
	ID      string          `json:"id,omitempty"`
	Session string          `json:"session,omitempty"`
	Channel string          `json:"channel,omitempty"`
	Actor   string          `json:"actor,omitempty"`
	TimeMs  int64           `json:"time_ms,omitempty"`
	V       int             `json:"v,omitempty"`
	Type    string          `json:"type,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

func decodeLine(seq uint64, subject string, stored time.Time, body []byte) eventLine {
	l := eventLine{Seq: seq, Subject: subject, Stored: stored.UTC().Format(time.RFC3339Nano)}
	env, err := events.Decode(body)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	l.ID, l.Session, l.Channel, l.Actor, l.TimeMs, l.V, l.Type = env.ID, env.Session, env.Channel, env.Actor, env.TimeMs, env.Version, string(env.Type)
	cmd, err := events.EncodeCommand(env.Payload)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cmd, &obj); err == nil {
		delete(obj, "type")
		l.Data, _ = json.Marshal(obj)
	}
	return l
}

// stream prints the events on filter from start (0: the first, or with
// tail, the stream's last tail.n events); with follow it
// keeps waiting for new ones until ctx ends, otherwise it stops at the
// last event present when it started.
func (f eventFlags) stream(ctx context.Context, w io.Writer, filter string, start uint64, tail *uint64, follow bool) error {
	nc, err := f.connect(ctx, "nats://"+f.Listen)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	name := strings.ToUpper(f.Prefix) + "_EVENTS"
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	if start == 0 && tail != nil {
		last := stream.CachedInfo().State.LastSeq
		start = last + 1 // only new events
		if *tail >= last {
			start = 1
		} else if *tail > 0 {
			start = last - *tail + 1
		}
	}
	cfg := natsjs.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: natsjs.DeliverAllPolicy}
	if start > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = natsjs.DeliverByStartSequencePolicy, start
	}
	var last uint64 // the last sequence on filter now: where a non-follow read ends
	if !follow {
		info, err := stream.Info(ctx, natsjs.WithSubjectFilter(filter))
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if len(info.State.Subjects) == 0 {
			return nil
		}
		m, err := stream.GetLastMsgForSubject(ctx, filter)
		if err != nil {
			return fmt.Errorf("stream %s: last event on %s: %w", name, filter, err)
		}
		last = m.Sequence
		if start > last {
			return nil
		}
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, err)
	}
	defer it.Stop()
	if follow {
		fmt.Fprintf(os.Stderr, "engine: following %s on stream %s (Ctrl-C stops)\n", filter, name)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	enc := json.NewEncoder(w)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, natsjs.ErrMsgIteratorClosed) {
				return nil // Ctrl-C
			}
			return fmt.Errorf("read %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := enc.Encode(decodeLine(md.Sequence.Stream, m.Subject(), md.Timestamp, m.Data())); err != nil {
			return err
		}
		if !follow && md.Sequence.Stream >= last {
			return nil
		}
	}
}

func (c *eventsCmd) Run(ctx context.Context) error {
	if err := events.ValidateSessionID(c.Session); err != nil {
		return fmt.Errorf("session %q: %w", c.Session, err)
	}
	return c.stream(ctx, os.Stdout, c.Prefix+".events."+c.Session, c.From, nil, c.Follow)
}

func (c *tailCmd) Run(ctx context.Context) error {
	return c.stream(ctx, os.Stdout, c.Prefix+".events.*", c.From, &c.Last, true)
}
