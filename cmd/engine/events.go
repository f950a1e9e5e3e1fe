package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
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

// source is one event stream to read and the subjects read from it.
type source struct{ name, filter string }

// sources are the streams and subjects holding session's events (every
// session's when session is ""): on a store whose layout record names K
// partitions, the session's partition (every partition, and the one
// stream of a store migrated from it); otherwise the one event stream.
func (f eventFlags) sources(ctx context.Context, nc *nats.Conn, session string) ([]source, error) {
	one := strings.ToUpper(f.Prefix) + "_EVENTS"
	token := session
	if token == "" {
		token = "*"
	}
	k, err := jetstream.Layout(ctx, nc, jetstream.LogConfig{Prefix: f.Prefix})
	if err != nil {
		return nil, fmt.Errorf("read the store's layout: %w", err)
	}
	oneSrc := source{one, f.Prefix + ".events." + token}
	if k <= 1 {
		return []source{oneSrc}, nil
	}
	// A store migrated from one stream keeps that stream's sessions on it.
	kept, err := jetstream.KeptSessions(ctx, nc, jetstream.LogConfig{Prefix: f.Prefix})
	if err != nil {
		return nil, fmt.Errorf("read the store's layout: %w", err)
	}
	if kept != nil && session != "" && kept.Has(session) {
		return []source{oneSrc}, nil
	}
	var out []source
	for p := range k {
		if session != "" && p != events.Partition(session, k) {
			continue
		}
		out = append(out, source{fmt.Sprintf("%s_%d", one, p), fmt.Sprintf("%s.events.%d.%s", f.Prefix, p, token)})
	}
	if kept != nil && session == "" {
		out = append(out, oneSrc)
	}
	return out, nil
}

// read prints session's events (every session's when session is "") from
// each of their streams: one after the other, or, following, all at once
// until ctx ends or one of them fails.
func (f eventFlags) read(ctx context.Context, w io.Writer, session string, start uint64, tail *uint64, follow bool) error {
	nc, err := f.connect(ctx, "nats://"+f.Listen)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	srcs, err := f.sources(ctx, nc, session)
	if err != nil {
		return err
	}
	if len(srcs) > 1 && start > 0 {
		return usage(fmt.Errorf("--from %d: the store spreads sessions over %d event streams, each with its own sequences: use --last N (from each stream), or engine events SESSION --from SEQ", start, len(srcs)))
	}
	lw := &lockedWriter{w: w}
	if !follow {
		for _, src := range srcs {
			if err := streamEvents(ctx, js, lw, src, start, tail, false); err != nil {
				return err
			}
		}
		return nil
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(srcs))
	for _, src := range srcs {
		go func() { errs <- streamEvents(fctx, js, lw, src, start, tail, true) }()
	}
	var first error
	for range srcs {
		if err := <-errs; err != nil && first == nil {
			first = err
			stop() // the other streams' readers end too
		}
	}
	return first
}

// lockedWriter writes whole lines from several streams' readers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// streamEvents prints the events of src from start (0: the first, or
// with tail, the stream's last tail.n events); with follow it keeps
// waiting for new ones until ctx ends, otherwise it stops at the last
// event present when it started.
func streamEvents(ctx context.Context, js natsjs.JetStream, w io.Writer, src source, start uint64, tail *uint64, follow bool) error {
	name, filter := src.name, src.filter
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
			if ctx.Err() != nil {
				return nil // Ctrl-C (the iterator is stopped when ctx ends)
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
	return c.read(ctx, os.Stdout, c.Session, c.From, nil, c.Follow)
}

func (c *tailCmd) Run(ctx context.Context) error {
	return c.read(ctx, os.Stdout, "", c.From, &c.Last, true)
}
