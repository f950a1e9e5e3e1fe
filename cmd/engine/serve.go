package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// natsFlags say how to reach an external NATS server or cluster.
type natsFlags struct {
	NATS         string `name:"nats" env:"ENGINE_NATS_URL" placeholder:"URL" help:"External NATS server or cluster (comma-separated URLs). Empty: start the embedded server."`
	NATSUser     string `name:"nats-user" env:"ENGINE_NATS_USER" help:"User for --nats. With the embedded server: the engine user's name (instead of the generated one in <data>/nats-users.json), required when --listen is not loopback."`
	NATSPassword string `name:"nats-password" env:"ENGINE_NATS_PASSWORD" help:"Password for --nats-user."`
	NATSCreds    string `name:"nats-creds" env:"ENGINE_NATS_CREDS" type:"existingfile" help:"Credentials (JWT + nkey) file for --nats."`
	NATSNKey     string `name:"nats-nkey" env:"ENGINE_NATS_NKEY" type:"existingfile" help:"NKey seed file for --nats."`
	TLSCA        string `name:"tls-ca" type:"existingfile" help:"CA certificate to verify the NATS server."`
	TLSCert      string `name:"tls-cert" type:"existingfile" help:"Client certificate for NATS (with --tls-key)."`
	TLSKey       string `name:"tls-key" type:"existingfile" help:"Client key for NATS (with --tls-cert)."`
}

// storeFlags say where the log is: an external server, or the embedded
// server's data directory.
type storeFlags struct {
	natsFlags
	storeCheckFlags
	Data         string `name:"data" default:"./engine-data" env:"ENGINE_DATA" type:"path" help:"Data directory of the embedded server's JetStream store."`
	ServerConfig string `name:"server-config" type:"existingfile" help:"nats-server config file for the embedded server (accounts, per-channel users and permissions, TLS); see deploy/nats-server.conf."`
	Prefix       string `name:"prefix" default:"tools" help:"Subject prefix: events on <prefix>.events.<session>, API on <prefix>.api.<channel>.<op>."`
	Replicas     int    `name:"replicas" default:"1" help:"Stream and KV replicas (3 on a 3-node cluster)."`

	admin     bool                // connect as the admin of the data directory's users (engine stream repair)
	guard     func() error        // asked before each append (serve's disk guard)
	embedded  *jetstream.Embedded // the embedded server connect started, if any
	acked     *ackWatermark       // serve's record of what the embedded store held (#24 row 1)
	needStore bool                // refuse a data directory without the event stream instead of creating one (issue 12)
	// waitNATS makes openLog wait for an external cluster that is not
	// there yet (serve, #20 item 1) instead of failing.
	waitNATS bool
}

// leaseOwner names this process in the projection runner's lease. With
// the embedded server the data directory's lock already makes the process
// the only one on it, so the name is the directory's: a restart after a
// crash takes its own lease back at once instead of waiting for it to
// expire. Against --nats: host, pid and a random part (the default).
func (c *storeFlags) leaseOwner() string {
	if c.NATS != "" {
		return ""
	}
	abs, err := filepath.Abs(c.Data)
	if err != nil {
		abs = c.Data
	}
	host, _ := os.Hostname()
	return "engine@" + host + ":" + abs
}

// userOf picks the user of a data directory's credentials this command
// connects as.
func (c *storeFlags) userOf(cr jetstream.Credentials) (string, string) {
	if c.admin {
		return cr.Admin.User, cr.Admin.Password
	}
	return cr.Engine.User, cr.Engine.Password
}

type serveCmd struct {
	storeFlags
	httpFlags
	apiConnFlags
	Listen     string        `name:"listen" default:"127.0.0.1:4222" env:"ENGINE_LISTEN" help:"host:port of the embedded NATS server (port 0: random). A non-loopback host requires --nats-user/--nats-password or --server-config with users."`
	Sync       string        `name:"sync" default:"interval" enum:"interval,always" help:"Embedded server fsync policy: 'interval' (nats-server default, 2m: a power loss can drop recently acknowledged appends) or 'always' (fsync before every acknowledgement)."`
	HTTP       string        `name:"http" default:"127.0.0.1:7420" env:"ENGINE_HTTP" help:"HTTP API, /metrics, /healthz, /readyz and the inspector page listen here ('' to disable)."`
	Registry   string        `name:"registry" type:"existingfile" env:"ENGINE_REGISTRY" help:"Registry file (JSON) overriding the embedded default registry."`
	RegistryKV bool          `name:"registry-kv" env:"ENGINE_REGISTRY_KV" help:"Serve the registry stored in the <PREFIX>_REGISTRY KV bucket (seeded with --registry or the default when empty) and follow its changes live: 'engine registry push FILE' updates every engine on the stream. Open turns keep their frozen tools."`
	Project    bool          `name:"projection" default:"true" negatable:"" help:"Take part in the projection that folds the log into the views. Engines on one stream elect one runner (a lease in the <PREFIX>_PROJECTION bucket); the others stand by and take over within seconds when it dies. --no-projection: never fold here, only read the views."`
	ReadyFile  string        `name:"ready-file" type:"path" help:"Write {\"nats_url\",\"http_addr\"} as JSON to this file once serving (for scripts and tests)."`
	MinFree    string        `name:"min-free" default:"64MiB" help:"Free space the embedded server's disk must keep: below it appends are refused at once with 507 storage_full and /readyz fails, until space returns ('0' disables)."`
	MaxLag     uint64        `name:"max-projection-lag" default:"10000" help:"Events the projection may be behind the log, once caught up, before /readyz fails."`
	Shutdown   time.Duration `name:"shutdown-timeout" default:"10s" help:"Grace period for in-flight requests on SIGINT/SIGTERM."`
}

// ready is what --ready-file receives.
type ready struct {
	NATSURL  string `json:"nats_url"`
	HTTPAddr string `json:"http_addr"`
	Stream   string `json:"stream"`
	PID      int    `json:"pid"`
}

func (c *serveCmd) Run(ctx context.Context, log zerolog.Logger) error {
	reg, err := loadRegistry(c.Registry)
	if err != nil {
		return err
	}
	acfg, err := c.apiConfig(api.Config{SubjectPrefix: c.Prefix + ".api", Logger: log.With().Str("component", "api").Logger()}, c.HTTP)
	if err != nil {
		return err
	}
	var disk *jetstream.DiskGuard
	if c.NATS == "" {
		minFree, err := parseBytes(c.MinFree)
		if err != nil {
			return fmt.Errorf("--min-free: %w", err)
		}
		disk = &jetstream.DiskGuard{Dir: c.Data, MinFree: minFree}
		c.guard = c.appendGuard(disk)
	}
	// The HTTP listener opens first (#20 item 2): while serve waits for
	// NATS, /healthz answers and /readyz says 503 and why.
	var httpSrv *http.Server
	var httpSwap swapHandler
	httpAddr := ""
	if c.HTTP != "" {
		ln, err := net.Listen("tcp", c.HTTP)
		if err != nil {
			return fmt.Errorf("listen HTTP on %s: %w (another engine running? use --http HOST:PORT)", c.HTTP, err)
		}
		httpAddr = ln.Addr().String()
		ln = newLimitListener(ln, c.HTTPMaxConn)
		httpSwap.set(startingHandler())
		rt := acfg.RequestTimeout
		if rt == 0 {
			rt = 30 * time.Second
		}
		httpSrv = newHTTPServer(&httpSwap, c.HTTPRead, rt)
		defer func() { _ = httpSrv.Close() }()
		go func() {
			if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("http server stopped")
			}
		}()
	}
	c.waitNATS = true
	jlog, url, closeLog, err := c.openLog(ctx, log, c.Listen, c.Sync)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := c.watchAcked(ctx, jlog, log); err != nil {
		return err
	}
	nc := jlog.Conn()
	m := metrics.New()
	acfg.Observe = m.ObserveRequest
	var proj *projection.Projection
	err = waitForNATS(ctx, log, "open the views", func(actx context.Context) error {
		var err error
		proj, err = projection.Open(actx, jlog, m.ProjectionConfig(projection.Config{
			Logger: log.With().Str("component", "projection").Logger(),
			Elect:  true, Owner: c.leaseOwner(), // one runner per stream (issue 12, item 7)
		}))
		return err
	})
	if err != nil {
		return err
	}
	var regStore *jetstream.RegistryStore
	if c.RegistryKV {
		if regStore, reg, err = registryFromKV(ctx, jlog, reg, log); err != nil {
			return err
		}
	}
	// An acknowledged append tells readiness the stream takes writes.
	wp := newWriteProbe(jlog)
	hooks := m.Hooks()
	if counted := hooks.Appended; counted != nil {
		hooks.Appended = func(n int, duplicate bool) { counted(n, duplicate); wp.appended() }
	} else {
		hooks.Appended = func(int, bool) { wp.appended() }
	}
	eng := service.New(jlog, proj, reg, service.Config{
		Logger: log.With().Str("component", "service").Logger(),
		Hooks:  hooks,
	})

	// Every registry version served stays addressable, so any engine
	// rebuilds a turn frozen against it (R31).
	if hist, err := jlog.OpenRegistryHistory(ctx); err != nil {
		log.Warn().Err(err).Msg("no registry history: turns rebuild only against registries this engine served")
	} else {
		eng.SetRegistryHistory(hist)
		if err := eng.RecordRegistry(ctx); err != nil {
			log.Warn().Err(err).Msg("record the registry in its history")
		}
	}

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	if regStore != nil {
		err := regStore.Watch(runCtx, func(data []byte, rev uint64) {
			r, err := resolver.Load(data)
			if err != nil {
				log.Error().Err(err).Uint64("revision", rev).Msg("registry in KV is invalid: keeping the current one")
				return
			}
			eng.SetRegistry(r)
			if err := eng.RecordRegistry(runCtx); err != nil {
				log.Warn().Err(err).Msg("record the registry in its history")
			}
			log.Info().Str("version", r.Version()).Uint64("revision", rev).Msg("registry updated from KV")
		})
		if err != nil {
			return err
		}
	}
	projDone := make(chan struct{})
	if c.Project {
		go func() { defer close(projDone); _ = proj.Run(runCtx) }() // returns only when runCtx ends
	} else {
		close(projDone)
	}

	a, err := api.New(eng, acfg)
	if err != nil {
		return err
	}
	apiNC, closeAPINC, err := c.serviceConn(ctx, url, nc)
	if err != nil {
		return err
	}
	defer closeAPINC()
	stopAPI, err := startMicro(runCtx, a, apiNC)
	if err != nil {
		return err
	}
	defer stopAPI()

	integrity := watchIntegrity(runCtx, jlog, proj, c.Project, 5*time.Second, log)
	diskReady := diskChecks(runCtx, disk, c.embedded, jlog, log)
	if httpSrv != nil {
		if c.Project {
			wp.watchRunner(proj)
		}
		go wp.run(runCtx)
		probes := newProbes(probeDeps{nc: nc, log: jlog, proj: proj, write: wp, projecting: c.Project, maxLag: c.MaxLag,
			extra: append([]health.Check{{Name: "log_integrity", Fn: func(context.Context) error { return integrity() }}, c.ackedCheck()}, diskReady...)})
		httpSwap.set(protect(a, httpHandler(a, m, probes, liveInfo(nc, proj))))
	}
	if c.ReadyFile != "" {
		data, _ := json.Marshal(ready{NATSURL: url, HTTPAddr: httpAddr, Stream: jlog.StreamName(), PID: os.Getpid()})
		tmp := c.ReadyFile + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
		if err := os.Rename(tmp, c.ReadyFile); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	// Shown at every log level but "disabled", as JSON like every other
	// line (#17 item 6).
	log.Log().Str("level", "info").Str("nats", url).Str("http", orNone(httpAddr)).Str("stream", jlog.StreamName()).
		Str("registry", reg.Version()).Msg("engine serving (Ctrl-C stops)")

	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.Shutdown)
	defer cancel()
	if httpSrv != nil {
		_ = httpSrv.Shutdown(sctx)
	}
	stopAPI()
	cancelRun() // the projection writes views before it acknowledges: stopping loses nothing
	<-projDone
	c.acked.flush(sctx)
	_ = nc.Drain()
	return nil
}

// registryFromKV returns the registry stored in the bucket, seeding the
// bucket with fallback when it holds none.
func registryFromKV(ctx context.Context, jlog *jetstream.Log, fallback *resolver.Registry, log zerolog.Logger) (*jetstream.RegistryStore, *resolver.Registry, error) {
	store, err := jlog.OpenRegistryStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	data, rev, err := store.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	if data == nil {
		seed, err := fallback.MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		if _, err := store.Put(ctx, seed); err != nil {
			return nil, nil, err
		}
		return store, fallback, nil
	}
	reg, err := resolver.Load(data)
	if err == nil {
		return store, reg, nil
	}
	// An invalid revision (anything published to the bucket's subject,
	// e.g. a JetStream ack a client sent there as its reply subject) must
	// not stop a restart (issue 11): serve the newest valid one.
	ev := log.Error().Err(err).Uint64("revision", rev)
	if hist, herr := store.History(ctx); herr == nil {
		for i := len(hist) - 1; i >= 0; i-- {
			if r, lerr := resolver.Load(hist[i].Data); lerr == nil {
				ev.Uint64("serving_revision", hist[i].Revision).Msg("registry in KV is invalid: serving the newest valid revision; store a valid one with engine registry push FILE")
				return store, r, nil
			}
		}
	}
	ev.Str("serving", fallback.Version()).Msg("registry in KV is invalid and no stored revision is valid: serving the --registry file or the default; store a valid one with engine registry push FILE")
	return store, fallback, nil
}

// loadRegistry loads the registry file at path, or returns the embedded
// default when path is empty.
func loadRegistry(path string) (*resolver.Registry, error) {
	if path == "" {
		return resolver.Default(), nil
	}
	reg, err := resolver.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load registry: %w", err)
	}
	return reg, nil
}

// openLog connects (starting the embedded server on listen when no --nats
// is given) and opens the event stream. The returned func closes the
// connection and shuts the embedded server down.
func (c *storeFlags) openLog(ctx context.Context, log zerolog.Logger, listen, sync string) (*jetstream.Log, string, func(), error) {
	if c.NATS != "" && c.waitNATS {
		return c.openLogWaiting(ctx, log)
	}
	nc, url, shutdown, err := c.connect(ctx, log, listen, sync)
	if err != nil {
		return nil, "", nil, err
	}
	closeLog := func() {
		nc.Close()
		shutdown()
	}
	if err := c.requireStream(ctx, nc); err != nil {
		closeLog()
		return nil, "", nil, err
	}
	jlog, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas, Guard: c.guard, Faults: c.storeFaults})
	if err != nil {
		closeLog()
		return nil, "", nil, err
	}
	return jlog, url, closeLog, nil
}

// openLogWaiting connects to --nats and opens the event stream, waiting
// (with back-off, saying why) while no node listens or JetStream cannot
// answer yet: a supervisor may start the engine before the cluster
// (#20 item 1). It returns early only on a permanent error or when ctx
// ends.
func (c *storeFlags) openLogWaiting(ctx context.Context, log zerolog.Logger) (*jetstream.Log, string, func(), error) {
	var nc *nats.Conn
	err := waitForNATS(ctx, log, "connect to "+c.NATS, func(actx context.Context) error {
		var err error
		nc, _, _, err = c.connect(actx, log, "", "")
		return err
	})
	if err != nil {
		return nil, "", nil, err
	}
	var jlog *jetstream.Log
	err = waitForNATS(ctx, log, "open the event stream", func(actx context.Context) error {
		var err error
		jlog, err = jetstream.OpenLog(actx, nc, jetstream.LogConfig{Prefix: c.Prefix, Replicas: c.Replicas})
		return err
	})
	if err != nil {
		nc.Close()
		return nil, "", nil, err
	}
	return jlog, c.NATS, nc.Close, nil
}

func orNone(s string) string {
	if s == "" {
		return "(off)"
	}
	return s
}

// connect opens the engine's NATS connection: to --nats, or to a freshly
// started embedded server (in-process, no TCP hop).
func (c *storeFlags) connect(ctx context.Context, log zerolog.Logger, listen, sync string) (*nats.Conn, string, func(), error) {
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
			// its generated users (issue 11).
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
	host, port, err := splitHostPort(listen)
	if err != nil {
		return nil, "", nil, err
	}
	if c.needStore && !jetstream.HasStore(c.Data, jetstream.EventStreamName(c.Prefix)) {
		return nil, "", nil, fmt.Errorf("data dir %s holds no event stream %s_EVENTS (wrong directory or --prefix?): refusing to create an empty store; pass the --data of the engine", c.Data, strings.ToUpper(c.Prefix))
	}
	if err := c.checkConfigLogin(); err != nil {
		return nil, "", nil, err
	}
	// Damage is found before the server loads the store (issue 24).
	if err := c.checkStore(ctx, log); err != nil {
		return nil, "", nil, err
	}
	cfg := jetstream.EmbeddedConfig{
		DataDir: c.Data, Host: host, Port: port, User: c.NATSUser, Password: c.NATSPassword,
		Sync: jetstream.SyncPolicy(sync), ConfigFile: c.ServerConfig,
	}
	if log.GetLevel() <= zerolog.DebugLevel {
		cfg.Logger = natsLogger{log.With().Str("component", "nats-server").Logger()}
	}
	var creds *jetstream.Credentials
	if c.ServerConfig == "" {
		// No anonymous access (issue 11): an engine user and an admin
		// with random passwords, kept in the data directory.
		cr, created, err := jetstream.LoadOrCreateCredentials(c.Data)
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
	opts := []nats.Option{nats.InProcessServer(srv.Server()), nats.Name("engine"), nats.MaxReconnects(-1), nats.ReconnectBufSize(-1)}
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
