package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// ready is what Config.ReadyFile receives.
type ready struct {
	NATSURL  string `json:"nats_url"`
	HTTPAddr string `json:"http_addr"`
	Stream   string `json:"stream"` // the event stream's name; partitions' comma-separated

	PID int `json:"pid"`
}

// Run is `engine serve`: it opens the HTTP listener first (its probes
// answer while the engine starts), connects to the store (waiting, with
// back-off and saying why in /readyz, for an external cluster that is not
// there yet), opens the log and the views (of every partition, with
// cfg.Partitions over one), starts the projection (of each stream, when
// elected), the NATS micro service, the HTTP API, the write probe, the
// log-integrity watcher, the disk checks and the acknowledged watermark,
// logs "engine serving" and serves until ctx ends. It then stops the
// transports within cfg.ShutdownTimeout, stops the projection (which
// loses nothing), records the watermark and drains the connection.
//
// It returns nil after a clean shutdown, and an error naming the bad
// setting or the failed step when it cannot start. Only one Run may use a
// data directory at a time (the embedded server locks it).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	reg := cfg.Registry
	acfg := cfg.API
	c := &store{Store: cfg.Store}
	var disk *jetstream.DiskGuard
	if c.NATS == "" {
		disk = &jetstream.DiskGuard{Dir: c.Data, MinFree: uint64(max(cfg.MinFree, 0))}
		c.guard = c.appendGuard(disk)
	}
	// The HTTP listener opens first: while serve waits for
	// NATS, /healthz answers and /readyz says 503 and why.
	var httpSwap swapHandler
	httpSrv, httpAddr, err := listenHTTP(cfg, &httpSwap)
	if err != nil {
		return err
	}
	if httpSrv != nil {
		defer func() { _ = httpSrv.Close() }()
	}
	c.waitNATS, c.serving, c.log = true, true, log
	logs, url, closeLog, err := c.openLogs(ctx, log)
	if err != nil {
		return err
	}
	defer closeLog()
	// The shared buckets (keys, registry, audit, actors, embeddings) are
	// every partition's: the first stream's log opens them.
	jlog := logs[0]
	// A layout record that changes under a serving engine stops it.
	ctx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	c.watchLayout(ctx, logs, stopServing, log)
	if err := c.watchAcked(ctx, jlog, log); err != nil {
		return err
	}
	nc := jlog.Conn()
	m := metrics.New()
	acfg.Observe = m.ObserveRequest
	parts, err := openParts(ctx, logs, m, c.LeaseOwner(), log)
	if err != nil {
		return err
	}
	regStore, reg, err := servedRegistry(ctx, cfg.RegistryKV, jlog, reg, log)
	if err != nil {
		return err
	}
	closePages := openPages(parts, log)
	defer closePages()
	eng, err := newEngine(ctx, parts, reg, m, cfg.EraseTakeover, log)
	if err != nil {
		return err
	}
	if err := startActors(ctx, cfg.Actors, jlog, eng, log.With().Str("component", "actors").Logger()); err != nil {
		return err
	}
	stopEraser := c.startEraser(ctx, cfg, url, parts, eng, log.With().Str("component", "eraser").Logger())
	defer stopEraser()

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	bg, err := c.startWorkers(runCtx, cfg, url, parts, eng, regStore, m)
	defer func() { cancelRun(); bg.wait() }() // no worker outlives the connection
	if err != nil {
		return err
	}

	a, err := api.New(eng, acfg)
	if err != nil {
		return err
	}
	if httpSrv != nil {
		httpSrv.RegisterOnShutdown(a.StopLive) // live streams never go idle: end them first
	}
	defer a.StopLive()
	apiNC, closeAPINC, err := serviceConn(ctx, cfg, url, nc)
	if err != nil {
		return err
	}
	defer closeAPINC()
	stopAPI, err := startMicro(runCtx, a, apiNC)
	if err != nil {
		return err
	}
	defer stopAPI()

	watchParts(runCtx, parts, !cfg.NoProjection, httpSrv != nil, log)
	diskReady := diskChecks(runCtx, disk, c.embedded, jlog, log)
	if httpSrv != nil {
		probes := newProbes(probeDeps{nc: nc, parts: parts, projecting: !cfg.NoProjection, maxLag: uint64(max(cfg.MaxProjectionLag, 0)),
			extra: append([]health.Check{c.ackedCheck()}, diskReady...)})
		httpSwap.set(protect(a, httpHandler(a, m, probes, liveInfo(nc, parts))))
	}
	if err := announce(cfg.ReadyFile, url, httpAddr, streamNames(parts), reg, log); err != nil {
		return err
	}

	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), max(cfg.ShutdownTimeout, 0))
	defer cancel()
	if httpSrv != nil {
		_ = httpSrv.Shutdown(sctx)
	}
	stopAPI()
	cancelRun() // the projection writes views before it acknowledges: stopping loses nothing
	bg.wait()
	c.acked.flush(sctx)
	_ = nc.Drain()
	if err := context.Cause(ctx); errors.Is(err, jetstream.ErrLayout) {
		return err
	}
	return nil
}

// servedRegistry is the registry to serve: with kv, the registry bucket's
// (stored first from fallback when the bucket is empty), waiting for NATS
// as the log's opening does, with the store that pushes to it; else
// fallback.
func servedRegistry(ctx context.Context, kv bool, jlog *jetstream.Log, fallback *resolver.Registry, log zerolog.Logger) (*jetstream.RegistryStore, *resolver.Registry, error) {
	if !kv {
		return nil, fallback, nil
	}
	var regStore *jetstream.RegistryStore
	reg := fallback
	err := waitForNATSOn(ctx, log, jlog.Conn(), "read the registry bucket", func(actx context.Context) error {
		var err error
		regStore, reg, err = registryFromKV(actx, jlog, fallback, log)
		return err
	})
	return regStore, reg, err
}

// announce writes the ready file (when readyFile is set) and logs
// "engine serving": the engine takes requests from now on.
func announce(readyFile, url, httpAddr string, streamNames []string, reg *resolver.Registry, log zerolog.Logger) error {
	streams := strings.Join(streamNames, ",")
	if readyFile != "" {
		if err := writeReady(readyFile, ready{NATSURL: url, HTTPAddr: httpAddr, Stream: streams, PID: os.Getpid()}); err != nil {
			return err
		}
	}
	// Shown at every log level but "disabled", as JSON like every other
	// line.
	log.Log().Str("level", "info").Str("nats", url).Str("http", orNone(httpAddr)).Str("stream", streams).
		Str("registry", reg.Version()).Msg("engine serving (Ctrl-C stops)")
	return nil
}

// watchLayout stops serving (stop, with the watch's error) when the
// store's layout record changes under the engine: a migration started,
// and sessions would be placed by a layout the store no longer has. The
// watch lives as long as ctx: each attempt is given ctx, not its own
// bounded one, and nats.go bounds its requests.
func (c *store) watchLayout(ctx context.Context, logs []*jetstream.Log, stop context.CancelCauseFunc, log zerolog.Logger) {
	jlog := logs[0]
	lc := jetstream.LogConfig{Prefix: c.Prefix, Partitions: max(c.Partitions, 1), OneStreamSessions: logs[len(logs)-1].OneStreamSessions()}
	if err := waitForNATSOn(ctx, log, jlog.Conn(), "watch the layout record", func(context.Context) error {
		return jetstream.WatchLayout(ctx, jlog.Conn(), lc, func(err error) {
			log.Error().Err(err).Msg("stopping")
			stop(err)
		})
	}); err != nil {
		log.Warn().Err(err).Msg("the store's layout record is not watched: an engine migrate would not stop this engine")
	}
}

// openProjection opens the views of jlog's stream, waiting for NATS as
// the log's opening does; the projection runs only while it holds the
// stream's lease for owner (one runner per stream).
func openProjection(ctx context.Context, jlog *jetstream.Log, m *metrics.Metrics, owner string, log zerolog.Logger) (*projection.Projection, error) {
	var proj *projection.Projection
	err := waitForNATS(ctx, log, "open the views", func(actx context.Context) error {
		var err error
		proj, err = projection.Open(actx, jlog, m.ProjectionConfig(projection.Config{
			Logger: log.With().Str("component", "projection").Logger(),
			Elect:  true, Owner: owner,
		}))
		return err
	})
	return proj, err
}

// workers are the goroutines Run starts beside the transports, each
// ending when the context they were started with ends.
type workers struct{ done []<-chan struct{} }

// wait blocks until every worker has ended.
func (w *workers) wait() {
	for _, d := range w.done {
		<-d
	}
	w.done = nil
}

// startWorkers starts, on ctx, the embeddings, the registry follower
// (regStore set), retention, the erase finisher, the registry prune, the
// spreading of the partitions' leaders and each stream's projection
// (unless cfg.NoProjection). On an error the
// workers started so far are in the result, to be waited for after ctx
// ends.
func (c *store) startWorkers(ctx context.Context, cfg Config, url string, parts []*part, eng *service.Engine, regStore *jetstream.RegistryStore, m *metrics.Metrics) (*workers, error) {
	log := cfg.Logger
	jlog, run := parts[0].log, runner(parts)
	w := &workers{}
	if err := startEmbeddings(ctx, cfg, jlog, eng, m, log.With().Str("component", "embeddings").Logger()); err != nil {
		return w, err
	}
	if regStore != nil {
		if err := followRegistry(ctx, regStore, eng, log); err != nil {
			return w, err
		}
	}
	retDone, err := startRetention(ctx, cfg, eng, run, m, log.With().Str("component", "retention").Logger())
	if err != nil {
		return w, err
	}
	w.done = append(w.done, retDone,
		startEraseFinisher(ctx, cfg, eng, run, log.With().Str("component", "eraser").Logger()),
		c.startRegistryPrune(ctx, cfg, url, jlog, eng, run, m, log.With().Str("component", "registry-prune").Logger()),
		startLeaderSpread(ctx, parts, c.Replicas, run, log.With().Str("component", "leaders").Logger()))
	if !cfg.NoProjection {
		for _, p := range parts {
			projDone := make(chan struct{})
			go func() { defer close(projDone); _ = p.proj.Run(ctx) }() // returns only when ctx ends
			w.done = append(w.done, projDone)
		}
	}
	return w, nil
}

// listenHTTP opens cfg.HTTP and serves h on it, first with the start-up
// answers; it returns a nil server when cfg.HTTP is empty.
func listenHTTP(cfg Config, h *swapHandler) (*http.Server, string, error) {
	if cfg.HTTP == "" {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return nil, "", fmt.Errorf("listen HTTP on %s: %w (another engine running? use --http HOST:PORT)", cfg.HTTP, err)
	}
	addr := ln.Addr().String()
	ln = newLimitListener(ln, cfg.HTTPMaxConns)
	h.set(startingHandler())
	rt := cfg.API.RequestTimeout
	if rt == 0 {
		rt = 30 * time.Second
	}
	srv := newHTTPServer(h, max(cfg.HTTPReadTimeout, 0), rt)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error().Err(err).Msg("http server stopped")
		}
	}()
	return srv, addr, nil
}

// newEngine builds the service on the parts' logs and views, with the
// metrics' hooks (and, over one stream, its write probe told of every
// acknowledged append: an append names no partition), and records the
// registry in its history: every registry version served stays
// addressable, so any engine rebuilds a turn frozen against it.
func newEngine(ctx context.Context, parts []*part, reg *resolver.Registry, m *metrics.Metrics, takeover time.Duration, log zerolog.Logger) (*service.Engine, error) {
	hooks := m.Hooks()
	if len(parts) == 1 {
		wp := parts[0].probe
		if counted := hooks.Appended; counted != nil {
			hooks.Appended = func(n int, duplicate bool) { counted(n, duplicate); wp.appended() }
		} else {
			hooks.Appended = func(int, bool) { wp.appended() }
		}
	}
	ports, err := ports(parts)
	if err != nil {
		return nil, err
	}
	eng := service.NewFromPorts(ports, reg, service.Config{
		Logger:        log.With().Str("component", "service").Logger(),
		Hooks:         hooks,
		EraseTakeover: takeover,
	})
	var hist *jetstream.RegistryHistory
	err = waitForNATSOn(ctx, log, parts[0].log.Conn(), "open the registry history", func(actx context.Context) error {
		var err error
		hist, err = parts[0].log.OpenRegistryHistory(actx)
		return err
	})
	if err != nil {
		log.Warn().Err(err).Msg("no registry history: turns rebuild only against registries this engine served")
	} else {
		eng.SetRegistryHistory(hist)
		if err := eng.RecordRegistry(ctx); err != nil {
			log.Warn().Err(err).Msg("record the registry in its history")
		}
	}
	return eng, nil
}

// followRegistry serves every valid registry stored in the bucket from
// now on, until ctx ends; an invalid one is logged and skipped.
func followRegistry(ctx context.Context, store *jetstream.RegistryStore, eng *service.Engine, log zerolog.Logger) error {
	return store.Watch(ctx, func(data []byte, rev uint64) {
		r, err := resolver.Load(data)
		if err != nil {
			log.Error().Err(err).Uint64("revision", rev).Msg("registry in KV is invalid: keeping the current one")
			return
		}
		if err := eng.ServeRegistry(ctx, r); err != nil {
			log.Warn().Err(err).Msg("record the registry in its history")
		}
		log.Info().Str("version", r.Version()).Uint64("revision", rev).Msg("registry updated from KV")
	})
}

// writeReady writes r to path as JSON, whole or not at all (a temporary
// file renamed).
func writeReady(path string, r ready) error {
	data, _ := json.Marshal(r)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
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
		seeded, err := store.Seed(ctx, seed)
		if err != nil {
			return nil, nil, err
		}
		if seeded {
			return store, fallback, nil
		}
		// Another engine stored one, or a replica behind the bucket's
		// leader answered the Get: read until a replica has it, within
		// ctx (the caller asks again when it ends).
		backoff := logport.Backoff{First: 10 * time.Millisecond, Max: 500 * time.Millisecond}
		for data == nil {
			if err := logport.Sleep(ctx, backoff.Next()); err != nil {
				return nil, nil, fmt.Errorf("the registry bucket holds a registry no replica serves yet: %w", err)
			}
			if data, rev, err = store.Get(ctx); err != nil {
				return nil, nil, err
			}
		}
	}
	reg, err := resolver.Load(data)
	if err == nil {
		return store, reg, nil
	}
	// An invalid revision (anything published to the bucket's subject,
	// e.g. a JetStream ack a client sent there as its reply subject) must
	// not stop a restart: serve the newest valid one.
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

func orNone(s string) string {
	if s == "" {
		return "(off)"
	}
	return s
}
