package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// store is an opened Store: its configuration and what serve hooks in.
type store struct {
	Store
	guard    func() error        // asked before each append (serve's disk guard)
	embedded *jetstream.Embedded // the embedded server connect started, if any
	acked    *ackWatermark       // serve's record of what the embedded store held
	// waitNATS makes openLog wait for an external cluster that is not
	// there yet instead of failing.
	waitNATS bool
	// unsaved are users connect generated for a command that needs an
	// existing store, kept out of the data directory until requireStream
	// finds the event stream they serve.
	unsaved *jetstream.Credentials
	// serving opens the store to serve it: the engine's publish
	// permissions are probed first, and a one-stream layout is recorded
	// (so that a partitioned engine is refused on it); the other commands
	// only check the layout.
	serving bool
	log     zerolog.Logger
}

// OpenLog connects to the store (starting the embedded server on
// s.Listen when s.NATS is empty, after checking its files) and opens the
// event stream, for the commands that work on the log without serving
// it (rebuild, stream repair, registry push). The returned func closes
// the connection and shuts the embedded server down; url is the NATS
// server's. It does not wait for a cluster that is not there.
func OpenLog(ctx context.Context, log zerolog.Logger, s Store) (jlog *jetstream.Log, url string, closeLog func(), err error) {
	c := &store{Store: s.withDefaults()}
	return c.openLog(ctx, log)
}

// OpenStreams is OpenLog for the commands that work on every event
// stream of the store (rebuild, stream repair): the one stream, or each
// partition's, in partition order, when the store's layout record names
// partitions, and then, on a store migrated from one stream, that one.
// The returned func closes the connection and shuts the embedded server
// down.
func OpenStreams(ctx context.Context, log zerolog.Logger, s Store) (logs []*jetstream.Log, url string, closeLog func(), err error) {
	c := &store{Store: s.withDefaults()}
	c.SharedBuckets = true // a partitioned store opens as its first partition
	jlog, url, closeLog, err := c.openLog(ctx, log)
	if err != nil {
		return nil, "", nil, err
	}
	logs = []*jetstream.Log{jlog}
	_, k := jlog.Partition()
	if k <= 1 {
		return logs, url, closeLog, nil
	}
	// A store migrated from one stream keeps that stream's sessions on it:
	// every partition's log refuses them, as the serving engine's do, and
	// the one stream's log comes after the partitions'.
	kept, err := jetstream.KeptSessions(ctx, jlog.Conn(), jetstream.LogConfig{Prefix: c.Prefix})
	if err != nil {
		closeLog()
		return nil, "", nil, err
	}
	// The layout check found every partition's stream (it creates none):
	// the first is open, the others open beside it (the first again on a
	// migrated store, with the kept sessions).
	if kept != nil {
		logs = logs[:0]
	}
	for p := len(logs); p < k; p++ {
		lc := jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas, Partitions: k, Partition: p, OneStreamSessions: kept}
		pl, err := jetstream.OpenLog(ctx, jlog.Conn(), lc)
		if err != nil {
			closeLog()
			return nil, "", nil, fmt.Errorf("open partition %d of %d: %w", p, k, err)
		}
		logs = append(logs, pl)
	}
	if kept != nil {
		kl, err := jetstream.OpenLog(ctx, jlog.Conn(), jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas, OneStreamSessions: kept})
		if err != nil {
			closeLog()
			return nil, "", nil, err
		}
		logs = append(logs, kl)
	}
	return logs, url, closeLog, nil
}

// userOf picks the user of a data directory's credentials this store
// connects as.
func (c *store) userOf(cr jetstream.Credentials) (string, string) {
	if c.Admin {
		return cr.Admin.User, cr.Admin.Password
	}
	return cr.Engine.User, cr.Engine.Password
}

// openLogs opens the event streams serve serves: those of every
// partition on an external cluster (waiting for it when c.waitNATS), or
// the one stream (openLog). The returned func closes the connection and
// shuts the embedded server down.
func (c *store) openLogs(ctx context.Context, log zerolog.Logger) ([]*jetstream.Log, string, func(), error) {
	if c.NATS != "" && c.waitNATS {
		return c.openLogWaiting(ctx, log)
	}
	if c.Partitions > 1 {
		return nil, "", nil, fmt.Errorf("--partitions %d needs --nats, the URL of a cluster", c.Partitions)
	}
	jlog, url, closeLog, err := c.openLog(ctx, log)
	if err != nil {
		return nil, "", nil, err
	}
	return []*jetstream.Log{jlog}, url, closeLog, nil
}

// openLog connects (starting the embedded server on c.Listen when no
// --nats is given) and opens the one event stream. The returned func
// closes the connection and shuts the embedded server down.
func (c *store) openLog(ctx context.Context, log zerolog.Logger) (*jetstream.Log, string, func(), error) {
	nc, url, shutdown, err := c.connect(ctx, log)
	if err != nil {
		return nil, "", nil, err
	}
	closeLog := func() {
		nc.Close()
		shutdown()
	}
	lc := jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas, Guard: c.guard, Faults: c.storeFaults}
	if err := c.probe(ctx, nc, lc); err != nil {
		closeLog()
		return nil, "", nil, err
	}
	if err := c.layout(ctx, nc, &lc); err != nil {
		closeLog()
		return nil, "", nil, err
	}
	// A layout record of partitions is the proof of a store.
	if lc.Partitions <= 1 {
		if err := c.requireStream(ctx, nc); err != nil {
			closeLog()
			return nil, "", nil, err
		}
	}
	if c.unsaved != nil {
		if err := jetstream.SaveCredentials(c.Data, *c.unsaved); err != nil {
			closeLog()
			return nil, "", nil, err
		}
		log.Log().Str("level", "info").Str("file", jetstream.CredentialsPath(c.Data)).Msg("created the embedded NATS server's users engine and admin (file mode 0600)")
		c.unsaved = nil
	}
	jlog, err := jetstream.OpenLog(ctx, nc, lc)
	if err != nil {
		closeLog()
		return nil, "", nil, err
	}
	return jlog, url, closeLog, nil
}

// openLogWaiting connects to --nats and opens the event streams (one,
// or those of every partition), waiting (with back-off, saying why)
// while no node listens or JetStream cannot answer yet: a supervisor may
// start the engine before the cluster. It returns early only on a
// permanent error or when ctx ends.
func (c *store) openLogWaiting(ctx context.Context, log zerolog.Logger) ([]*jetstream.Log, string, func(), error) {
	var nc *nats.Conn
	err := waitForNATS(ctx, log, "connect to "+c.NATS, func(actx context.Context) error {
		var err error
		nc, _, _, err = c.connect(actx, log)
		return err
	})
	if err != nil {
		return nil, "", nil, err
	}
	// The probe runs once, with its own bounds: a refusal is definite
	// whatever state the cluster is in.
	if err := c.probe(ctx, nc, jetstream.LogConfig{Prefix: c.Prefix, Partitions: c.Partitions}); err != nil {
		nc.Close()
		return nil, "", nil, err
	}
	var logs []*jetstream.Log
	err = waitForNATS(ctx, log, "open the event stream", func(actx context.Context) error {
		return c.openStreams(actx, nc, &logs)
	})
	if err != nil {
		nc.Close()
		return nil, "", nil, err
	}
	return logs, c.NATS, nc.Close, nil
}

// openStreams opens the event streams of c's layout on nc into logs:
// those of every partition, or the one stream.
// A request the server's permissions refuse meanwhile ends the open at
// once: it would only time out, again on every retry.
func (c *store) openStreams(ctx context.Context, nc *nats.Conn, logs *[]*jetstream.Log) error {
	lc := jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas, Partitions: c.Partitions}
	if c.Partitions <= 1 {
		// The one-stream layout record may be refused: claimOneStream
		// carries on without it, so the watch starts after it.
		if err := c.layout(ctx, nc, &lc); err != nil {
			return err
		}
	}
	err := jetstream.WatchRefusal(ctx, nc, "", func(ctx context.Context) error {
		var err error
		if c.Partitions > 1 {
			*logs, err = jetstream.OpenPartitions(ctx, nc, lc)
			if err != nil {
				return layoutHint(err)
			}
			// A store migrated from one stream serves that stream too: the
			// user needs its subjects and buckets as well.
			if (*logs)[len(*logs)-1].OneStreamSessions() == nil {
				return nil
			}
			err := jetstream.CheckPublish(ctx, nc, jetstream.LogConfig{Prefix: c.Prefix}.PublishSubjects(projection.DefaultBucket)...)
			if err != nil && !errors.Is(err, jetstream.ErrPublishRefused) {
				c.log.Warn().Err(err).Msg("the engine's publish permissions on the one stream the migration kept are not checked")
				return nil
			}
			return err
		}
		jlog, err := jetstream.OpenLog(ctx, nc, lc)
		*logs = []*jetstream.Log{jlog}
		return err
	})
	if errors.Is(err, jetstream.ErrPublishRefused) {
		return fmt.Errorf("%w: %s", err, permissionsHint)
	}
	return err
}

// permissionsHint says where the permissions an engine needs are listed.
const permissionsHint = "the NATS user lacks a permission the engine needs (deploy/nats-server.conf lists them; a store of partitions needs deploy/partitioned/nats-server.conf's, which also name the one stream a migration from it kept)"

// probe asks, when serving, whether the engine's NATS user may publish
// what serving lc needs (jetstream.CheckPublish: appends, views,
// projection and history keys of every partition; nothing is written),
// before anything is created. A refusal is returned, naming the subjects;
// a probe left unanswered (under load) is logged and the open goes on.
func (c *store) probe(ctx context.Context, nc *nats.Conn, lc jetstream.LogConfig) error {
	if !c.serving {
		return nil
	}
	err := jetstream.CheckPublish(ctx, nc, lc.PublishSubjects(projection.DefaultBucket)...)
	switch {
	case errors.Is(err, jetstream.ErrPublishRefused):
		return fmt.Errorf("%w: %s", err, permissionsHint)
	case err != nil:
		c.log.Warn().Err(err).Msg("the engine's publish permissions are not checked")
	}
	return nil
}

// layout checks the store's layout against lc's one stream; a command
// that opens only the shared buckets (c.SharedBuckets) opens a store of
// partitions as its first partition instead.
func (c *store) layout(ctx context.Context, nc *nats.Conn, lc *jetstream.LogConfig) error {
	if c.serving {
		return c.claimOneStream(ctx, nc, *lc)
	}
	if !c.SharedBuckets {
		return layoutHint(jetstream.CheckLayout(ctx, nc, *lc))
	}
	k, err := jetstream.Layout(ctx, nc, *lc)
	if err != nil {
		return err
	}
	if k > 1 {
		lc.Partitions, lc.Partition = k, 0
		// The record proves a store, so a missing stream is lost, not
		// new: it is never created empty here.
		return jetstream.CheckPartitionStreams(ctx, nc, *lc)
	}
	return nil
}

// claimOneStream records the one-stream layout lc, or checks it against
// the store's record. When the server refuses the record (a NATS user
// that may not write the layout bucket) it checks only, and logs what a
// partitioned engine could then do.
func (c *store) claimOneStream(ctx context.Context, nc *nats.Conn, lc jetstream.LogConfig) error {
	err := jetstream.ClaimLayout(ctx, nc, lc)
	if !errors.Is(err, jetstream.ErrPublishRefused) {
		return layoutHint(err)
	}
	c.log.Warn().Err(err).Str("bucket", jetstream.LayoutBucket(lc.Prefix)).
		Msg("the one-stream layout is not recorded (the NATS user may not publish to $KV.<PREFIX>_LAYOUT.>, see deploy/nats-server.conf): an engine started with --partitions on this store while its stream is empty would not be refused")
	return layoutHint(jetstream.CheckLayout(ctx, nc, lc))
}

// layoutHint adds to a refusal of the store's layout (jetstream.ErrLayout)
// the flag that serves a partitioned one; other errors pass unchanged.
func layoutHint(err error) error {
	if !errors.Is(err, jetstream.ErrLayout) || errors.Is(err, jetstream.ErrMigrating) || strings.Contains(err.Error(), "engine serve --nats URL --partitions") {
		return err
	}
	return fmt.Errorf("%w (engine serve --nats URL --partitions K serves a store of K event streams)", err)
}

// connect opens the engine's NATS connection: to --nats, or to a freshly
// started embedded server (in-process, no TCP hop).
func (c *store) connect(ctx context.Context, log zerolog.Logger) (*nats.Conn, string, func(), error) {
	status := func(event string, err error) {
		ev := log.Warn().Str("event", event)
		if event == "closed" { // the engine closes it on a normal exit
			ev = log.Info().Str("event", event)
		}
		if err != nil {
			ev = ev.Err(err)
		}
		ev.Msg("nats connection")
	}
	if c.NATS != "" {
		user, password := c.NATSUser, c.NATSPassword
		if user == "" && c.NATSCreds == "" && c.NATSNKey == "" {
			// The embedded server of an engine on this data directory:
			// its generated users.
			if cr, err := jetstream.ReadCredentials(c.Data); err == nil {
				user, password = c.userOf(cr)
			}
		}
		nc, err := jetstream.Connect(ctx, jetstream.ConnConfig{
			URL: c.NATS, User: user, Password: password, CredsFile: c.NATSCreds, NKeySeedFile: c.NATSNKey,
			TLSCAFile: c.TLSCA, TLSCertFile: c.TLSCert, TLSKeyFile: c.TLSKey, OnStatus: status,
		})
		return nc, c.NATS, func() {}, err
	}
	host, port, err := splitHostPort(c.Listen)
	if err != nil {
		return nil, "", nil, err
	}
	if c.RequireStream && !jetstream.HasStore(c.Data, jetstream.EventStreamName(c.Prefix)) {
		return nil, "", nil, fmt.Errorf("data dir %s holds no event stream %s_EVENTS (wrong directory or --prefix?): refusing to create an empty store; pass the --data of the engine", c.Data, strings.ToUpper(c.Prefix))
	}
	if err := c.checkConfigLogin(); err != nil {
		return nil, "", nil, err
	}
	// Damage is found before the server loads the store.
	if err := c.checkStore(ctx, log); err != nil {
		return nil, "", nil, err
	}
	cfg := jetstream.EmbeddedConfig{
		DataDir: c.Data, Host: host, Port: port, User: c.NATSUser, Password: c.NATSPassword,
		Sync: jetstream.SyncPolicy(c.Sync), SyncEvery: c.SyncEvery, ConfigFile: c.ServerConfig,
	}
	if log.GetLevel() <= zerolog.DebugLevel {
		cfg.Logger = natsLogger{log.With().Str("component", "nats-server").Logger()}
	}
	var creds *jetstream.Credentials
	if c.ServerConfig == "" {
		// No anonymous access: an engine user and an admin
		// with random passwords, kept in the data directory.
		var cr jetstream.Credentials
		var created bool
		var err error
		if c.RequireStream {
			// A store without the users file may be one served with
			// --server-config: its users are written only once the event
			// stream is found in their account (openLog).
			if cr, err = jetstream.ReadCredentials(c.Data); errors.Is(err, fs.ErrNotExist) {
				cr, err = jetstream.NewCredentials(), nil
				c.unsaved = &cr
			}
		} else {
			cr, created, err = jetstream.LoadOrCreateCredentials(c.Data)
		}
		if err != nil {
			return nil, "", nil, err
		}
		if created {
			log.Log().Str("level", "info").Str("file", jetstream.CredentialsPath(c.Data)).Msg("created the embedded NATS server's users engine and admin (file mode 0600): " +
				"the engine's CLI finds them there, natscli needs --user engine --password <from that file>")
		}
		if c.NATSUser != "" {
			cr.Engine = jetstream.UserPass{User: c.NATSUser, Password: c.NATSPassword}
		}
		creds, cfg.Credentials = &cr, &cr
	}
	srv, err := jetstream.StartEmbedded(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	c.embedded = srv
	opts := []nats.Option{nats.InProcessServer(srv.Server()), nats.Name("engine"), nats.MaxReconnects(-1), nats.ReconnectBufSize(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { status("error", err) })}
	switch {
	case creds != nil:
		opts = append(opts, nats.UserInfo(c.userOf(*creds)))
	case c.NATSUser != "":
		opts = append(opts, nats.UserInfo(c.NATSUser, c.NATSPassword))
	}
	if c.ServerConfig != "" && c.NATSUser == "" {
		if u, p := os.Getenv("ENGINE_NATS_USER"), os.Getenv("ENGINE_NATS_PASSWORD"); u != "" {
			opts = append(opts, nats.UserInfo(u, p))
		}
	}
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		srv.Shutdown()
		return nil, "", nil, c.embeddedConnectError(err)
	}
	return nc, srv.ClientURL(), srv.Shutdown, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: %w (want host:port, e.g. 127.0.0.1:4222)", addr, err)
	}
	var port int
	if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: port %q is not 0..65535", addr, p)
	}
	return host, port, nil
}

// natsLogger adapts zerolog to nats-server's Logger.
type natsLogger struct{ l zerolog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Info().Msgf(format, v...) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn().Msgf(format, v...) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error().Msgf(format, v...) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error().Msgf(format, v...) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug().Msgf(format, v...) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Trace().Msgf(format, v...) }

// Migrate moves the store of one event stream on s.NATS to partitions
// (jetstream.Migrate), connected as s says. The embedded server is
// refused: its one server would lead every partition.
func Migrate(ctx context.Context, log zerolog.Logger, s Store, m jetstream.Migration) (jetstream.MigrationReport, error) {
	c := &store{Store: s.withDefaults()}
	if c.NATS == "" {
		return jetstream.MigrationReport{}, errors.New("engine migrate needs --nats, the URL of the cluster serving the store: partitions are for a cluster, and the embedded server serves one stream")
	}
	nc, _, closeConn, err := c.connect(ctx, log)
	if err != nil {
		return jetstream.MigrationReport{}, err
	}
	defer func() {
		nc.Close()
		closeConn()
	}()
	return jetstream.Migrate(ctx, nc, jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas}, m)
}
