package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/service"
)

// part is one event stream serve serves, with its views and what serve
// watches on it: one for the one-stream layout, one per partition when
// the sessions are spread over several streams.
type part struct {
	// id is "" for the one stream, else the partition's number: it
	// suffixes the names of the part's readiness checks.
	id    string
	log   *jetstream.Log
	proj  *projection.Projection
	pages *jetstream.Log // the history pages' log; nil: they read on log
	probe *writeProbe
	// integrity is the part's log-integrity readiness input
	// (watchIntegrity), set once serving.
	integrity func() error
}

// openParts opens the views of each log and its write probe; the
// projection of each runs only while it holds its stream's lease for
// owner (one runner per stream, each elected on its own).
func openParts(ctx context.Context, logs []*jetstream.Log, m *metrics.Metrics, owner string, log zerolog.Logger) ([]*part, error) {
	parts := make([]*part, len(logs))
	for i, jlog := range logs {
		p := &part{log: jlog, probe: newWriteProbe(jlog)}
		plog := log
		switch {
		case jlog.OneStreamSessions() != nil:
			// A migrated store's one stream, holding the sessions the
			// migration kept on it.
			p.id = keptID
			plog = log.With().Str("partition", keptID).Logger()
		case len(logs) > 1:
			p.id = strconv.Itoa(i)
			plog = log.With().Int("partition", i).Logger()
		}
		var err error
		if p.proj, err = openProjection(ctx, jlog, m, owner, plog); err != nil {
			return nil, err
		}
		parts[i] = p
	}
	return parts, nil
}

// keptID names, in readiness checks and logs, the one stream of a store
// migrated to partitions.
const keptID = "one"

// kept is the set of sessions a migration kept on the parts' one stream,
// nil when the parts are not of a migrated store (its one stream's log
// comes last).
func kept(parts []*part) *jetstream.SessionSet {
	return parts[len(parts)-1].log.OneStreamSessions()
}

// check names a readiness check of the part: name, suffixed with the
// partition's number when there are several.
func (p *part) check(name string) string {
	if p.id == "" {
		return name
	}
	return name + "_" + p.id
}

// runner reports whether this engine runs the projection of the first
// stream: the engine-wide workers (retention, the erase finisher, the
// registry prune) run there, so one engine of the deployment runs them.
func runner(parts []*part) func() bool { return parts[0].proj.Runner }

// streamNames are the event streams' names, in partition order.
func streamNames(parts []*part) []string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.log.StreamName()
	}
	return names
}

// openPages gives every part its history-pages log: its stream on one
// second connection, made with the engine's options, so that a page's
// batch of hundreds of messages never queues ahead of the appends'
// acknowledgements. Without it (the connection failed, logged) pages
// read on the engine's connection. The returned func closes it.
func openPages(parts []*part, log zerolog.Logger) func() {
	opts := parts[0].log.Conn().Opts
	opts.Name += "-history"
	// The copied status handlers would log this connection's events as the
	// engine's own: these name it.
	status := func(event string, err error) {
		log.Warn().Str("event", event).Str("connection", opts.Name).AnErr("error", err).Msg("nats connection for history pages")
	}
	opts.DisconnectedErrCB = func(_ *nats.Conn, err error) {
		if err != nil { // nil: the engine closed it
			status("disconnected", err)
		}
	}
	opts.ReconnectedCB = func(*nats.Conn) { status("reconnected", nil) }
	opts.ClosedCB = nil
	opts.AsyncErrorCB = func(_ *nats.Conn, _ *nats.Subscription, err error) { status("error", err) }
	nc, err := opts.Connect()
	pages := make([]*jetstream.Log, len(parts))
	for i := 0; err == nil && i < len(parts); i++ {
		pages[i], err = parts[i].log.OnConn(nc)
	}
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		log.Warn().Err(err).Msg("no second NATS connection for history pages: they read on the engine's connection")
		return func() {}
	}
	for i, p := range parts {
		p.pages = pages[i]
	}
	return nc.Close
}

// ports are the service's ports over the parts: the one stream's log and
// views, or the partitions' routed by session.
func ports(parts []*part) (service.Ports, error) {
	each := make([]service.Ports, len(parts))
	for i, p := range parts {
		each[i] = service.JetStreamPorts(p.log, p.proj)
		if p.pages != nil {
			each[i].Pages = p.pages
		}
	}
	if len(each) == 1 {
		return each[0], nil
	}
	if set := kept(parts); set != nil {
		return partition.NewMigratedPorts(set, each...)
	}
	return partition.NewPorts(each...)
}

// newErasers opens each part's eraser on the privileged connection enc
// (nil: the engine's own), with before and after, when set, as its purge
// hooks; several parts are routed by session.
func newErasers(ctx context.Context, parts []*part, enc *nats.Conn, before func(jetstream.EraseReport) error, after func(jetstream.EraseReport, error)) (service.Eraser, error) {
	xs := make([]service.Eraser, len(parts))
	for i, p := range parts {
		x, err := p.log.NewEraser(ctx, enc)
		if err != nil {
			if len(parts) > 1 {
				err = fmt.Errorf("partition %d: %w", i, err)
			}
			return nil, err
		}
		x.BeforePurge, x.AfterPurge = before, after
		xs[i] = x
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	if set := kept(parts); set != nil {
		return partition.NewMigratedEraser(set, xs...)
	}
	return partition.NewEraser(xs...)
}

// watchParts starts each part's log-integrity watch (watchIntegrity)
// and, when probe, its write probe, until ctx ends.
func watchParts(ctx context.Context, parts []*part, projecting, probe bool, log zerolog.Logger) {
	for _, p := range parts {
		plog := log
		if p.id != "" {
			plog = log.With().Str("partition", p.id).Logger()
		}
		p.integrity = watchIntegrity(ctx, p.log, p.proj, projecting, 5*time.Second, plog)
		if !probe {
			continue
		}
		if projecting {
			p.probe.watchRunner(p.proj)
		}
		p.probe.write = p.proj.Meta().ProbeWrite
		go p.probe.run(ctx)
	}
}

// Leader spreading timing: the first pass soon after start, the next soon
// after a move (the election settles in about a second), then rarely.
const (
	spreadFirst = 3 * time.Second
	spreadAfter = 5 * time.Second
	spreadEvery = 30 * time.Second
)

// startLeaderSpread places the partitions' stream leaders on different
// servers (jetstream.SpreadLeaders, one step-down per pass), on the engine
// that runs the first stream's projection (runner), until ctx ends. One
// stream, or streams of one replica, need nothing. The returned channel
// closes when the loop has stopped.
func startLeaderSpread(ctx context.Context, parts []*part, replicas int, runner func() bool, log zerolog.Logger) <-chan struct{} {
	if len(parts) < 2 || replicas < 2 {
		return paced(ctx, 0, nil)
	}
	logs := make([]*jetstream.Log, len(parts))
	for i, p := range parts {
		logs[i] = p.log
	}
	return paced(ctx, spreadFirst, func() time.Duration {
		if !runner() {
			return spreadEvery
		}
		s, err := jetstream.SpreadLeaders(ctx, logs)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("spread the partitions' stream leaders")
		case s.Moved != "":
			log.Info().Str("stream", s.Moved).Str("from", s.From).Str("to", s.To).Strs("leaders", s.Leaders).
				Msg("a partition's stream leader moved to a server leading fewer partitions")
			return spreadAfter
		}
		return spreadEvery
	})
}
