package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/server"
)

// natsFlags say how to reach an external NATS server or cluster.
type natsFlags struct {
	NATS         string `name:"nats" env:"ENGINE_NATS_URL" placeholder:"URL" help:"External NATS server or cluster (comma-separated URLs). Empty: start the embedded server."`
	NATSUser     string `name:"nats-user" env:"ENGINE_NATS_USER" help:"User for --nats. With the embedded server: the engine user's name (instead of the generated one in <data>/nats-users.json), required when --listen is not loopback."`
	NATSPassword string `name:"nats-password" env:"ENGINE_NATS_PASSWORD" help:"Password for --nats-user."`
	NATSCreds    string `name:"nats-creds" env:"ENGINE_NATS_CREDS" type:"existingfile" help:"Credentials (JWT + nkey) file for --nats."`
	NATSNKey     string `name:"nats-nkey" env:"ENGINE_NATS_NKEY" type:"existingfile" help:"NKey seed file for --nats."`
	TLSCA        string `name:"tls-ca" env:"ENGINE_TLS_CA" type:"existingfile" help:"CA certificate to verify the NATS server."`
	TLSCert      string `name:"tls-cert" env:"ENGINE_TLS_CERT" type:"existingfile" help:"Client certificate for NATS (with --tls-key)."`
	TLSKey       string `name:"tls-key" env:"ENGINE_TLS_KEY" type:"existingfile" help:"Client key for NATS (with --tls-cert)."`
}

// storeFlags say where the log is: an external server, or the embedded
// server's data directory.
type storeFlags struct {
	natsFlags
	storeCheckFlags
	Data         string `name:"data" default:"./engine-data" env:"ENGINE_DATA" type:"path" help:"Data directory of the embedded server's JetStream store."`
	ServerConfig string `name:"server-config" env:"ENGINE_SERVER_CONFIG" type:"existingfile" help:"nats-server config file for the embedded server (accounts, per-channel users and permissions, TLS); see deploy/nats-server.conf."`
	Prefix       string `name:"prefix" env:"ENGINE_PREFIX" default:"tools" help:"Subject prefix: events on <prefix>.events.<session>, API on <prefix>.api.<channel>.<op>."`
	Replicas     int    `name:"replicas" env:"ENGINE_REPLICAS" default:"1" help:"Stream and KV replicas (3 on a 3-node cluster)."`

	admin     bool // connect as the admin of the data directory's users (engine stream repair)
	needStore bool // refuse a data directory without the event stream instead of creating one
	shared    bool // only the buckets every partition shares are used: a partitioned store opens
}

// store maps the flags to the server's Store on listen (the embedded
// server's host:port) with fsync policy sync.
func (c *storeFlags) store(listen, sync string) server.Store {
	return server.Store{
		NATS: c.NATS, NATSUser: c.NATSUser, NATSPassword: c.NATSPassword, NATSCreds: c.NATSCreds, NATSNKey: c.NATSNKey,
		TLSCA: c.TLSCA, TLSCert: c.TLSCert, TLSKey: c.TLSKey,
		Data: c.Data, ServerConfig: c.ServerConfig, Prefix: c.Prefix, Replicas: c.Replicas, Listen: listen, Sync: sync,
		AcceptStoreDamage: c.AcceptStoreDamage, Admin: c.admin, RequireStream: c.needStore, SharedBuckets: c.shared,
	}
}

// serveStore is the store of engine serve: c.store with the sync interval.
func (c *serveCmd) serveStore() server.Store {
	st := c.store(c.Listen, c.Sync)
	st.SyncEvery = c.SyncEvery
	st.Partitions = c.Partitions
	return st
}

// openLog connects (starting the embedded server on a random loopback
// port with interval sync when no --nats is given) and opens the event
// stream (server.OpenLog), for the commands other than serve. The
// returned func closes the connection and shuts the embedded server down.
func (c *storeFlags) openLog(ctx context.Context, log zerolog.Logger) (*jetstream.Log, func(), error) {
	jlog, _, closeLog, err := server.OpenLog(ctx, log, c.store("127.0.0.1:0", "interval"))
	return jlog, closeLog, err
}

// openExisting is openLog for the commands that work on an existing event
// stream (a data directory without one is refused), as the admin of the
// data directory's users when admin.
func (c *storeFlags) openExisting(ctx context.Context, log zerolog.Logger, admin bool) (*jetstream.Log, func(), error) {
	c.admin, c.needStore = admin, true
	return c.openLog(ctx, log)
}

// openStreams is openExisting for the commands that work on every event
// stream of the store (server.OpenStreams).
func (c *storeFlags) openStreams(ctx context.Context, log zerolog.Logger, admin bool) ([]*jetstream.Log, func(), error) {
	c.admin, c.needStore = admin, true
	logs, _, closeLog, err := server.OpenStreams(ctx, log, c.store("127.0.0.1:0", "interval"))
	return logs, closeLog, err
}

// leaseOwner names this process in the projection runner's lease
// (server.Store.LeaseOwner).
func (c *storeFlags) leaseOwner() string { return c.store("", "").LeaseOwner() }

// storeCheckFlags are the start-up store check's flags.
type storeCheckFlags struct {
	AcceptStoreDamage bool `name:"accept-store-damage" env:"ENGINE_ACCEPT_STORE_DAMAGE" help:"Start on an embedded store whose blocks the start-up check found damaged, accepting the loss: only the damaged bytes are dropped (the intact records after them are kept), copies of the damaged files and a list of the dropped records by subject (session) are kept in <data>/damaged-<time>, the stream's index is rebuilt from the blocks, and the missing sequences are recorded as accepted. What erases and compactions purged is never damage. Without it the engine refuses such a store; restoring from a backup or a replica loses nothing."`
}

type serveCmd struct {
	storeFlags
	httpFlags
	apiConnFlags
	actorFlags
	embeddingFlags
	Listen      string        `name:"listen" default:"127.0.0.1:4222" env:"ENGINE_LISTEN" help:"host:port of the embedded NATS server (port 0: random). A non-loopback host requires --nats-user/--nats-password or --server-config with users."`
	Sync        string        `name:"sync" env:"ENGINE_SYNC" default:"interval" enum:"interval,always" help:"Embedded server fsync policy: 'interval' (nats-server default, 2m: a power loss can drop recently acknowledged appends) or 'always' (fsync before every acknowledgement)."`
	SyncEvery   time.Duration `name:"sync-interval" env:"ENGINE_SYNC_INTERVAL" default:"2m" help:"Embedded server's sync interval (nats-server sync_interval): how often it fsyncs under --sync interval, and, under either policy, how often it compacts the message blocks that erases and compactions emptied (the purged bytes leave the disk then)."`
	Partitions  int           `name:"partitions" env:"ENGINE_PARTITIONS" default:"1" help:"Spread the sessions over this many event streams (<PREFIX>_EVENTS_0 ...), each with its own leader, on the --nats cluster: for a write rate one stream leader cannot take (docs/scaling.md). The first engine on a store records the number; every other engine must give the same one. 1: one event stream, <PREFIX>_EVENTS."`
	HTTP        string        `name:"http" default:"127.0.0.1:7420" env:"ENGINE_HTTP" help:"HTTP API, /metrics, /healthz, /readyz and the inspector page listen here ('' to disable)."`
	Registry    string        `name:"registry" type:"existingfile" env:"ENGINE_REGISTRY" help:"Registry file (JSON) overriding the embedded default registry."`
	RegistryKV  bool          `name:"registry-kv" env:"ENGINE_REGISTRY_KV" help:"Serve the registry stored in the <PREFIX>_REGISTRY KV bucket (seeded with --registry or the default when empty) and follow its changes live: 'engine registry push FILE' updates every engine on the stream. Open turns keep their frozen tools."`
	Project     bool          `name:"projection" env:"ENGINE_PROJECTION" default:"true" negatable:"" help:"Take part in the projection that folds the log into the views. Engines on one stream elect one runner (a lease in the <PREFIX>_PROJECTION bucket); the others stand by and take over within seconds when it dies. --no-projection: never fold here, only read the views."`
	ReadyFile   string        `name:"ready-file" env:"ENGINE_READY_FILE" type:"path" help:"Write {\"nats_url\",\"http_addr\"} as JSON to this file once serving (for scripts and tests)."`
	MinFree     string        `name:"min-free" env:"ENGINE_MIN_FREE" default:"64MiB" help:"Free space the embedded server's disk must keep: below it appends are refused at once with 507 storage_full and /readyz fails, until space returns ('0' disables)."`
	MaxLag      uint64        `name:"max-projection-lag" env:"ENGINE_MAX_PROJECTION_LAG" default:"10000" help:"Events the projection may be behind the log, once caught up, before /readyz fails."`
	Shutdown    time.Duration `name:"shutdown-timeout" env:"ENGINE_SHUTDOWN_TIMEOUT" default:"10s" help:"Grace period for in-flight requests on SIGINT/SIGTERM."`
	DeleteChans []string      `name:"delete-channel" env:"ENGINE_DELETE_CHANNELS" help:"Channels that may delete sessions (DELETE /v1/sessions/{session}, engine delete), besides the erase channel; repeat or comma-separate. Default: every writing channel may."`
	EraseChan   string        `name:"erase-channel" env:"ENGINE_ERASE_CHANNEL" default:"ops" help:"The one channel that may erase sessions (DELETE /v1/sessions/{session}?erase=true, engine erase): their events are purged, an audit record without personal data is kept."`

	RetainIdle   string        `name:"retain-idle" env:"ENGINE_RETAIN_IDLE" placeholder:"DURATION" help:"Retention: delete the sessions whose last event is older than this (units d, h, m, s: 90d, 36h, 1d12h). A SessionDeleted with reason 'retention: idle since <time>', channel engine, actor engine:retention; a session written meanwhile is kept. Runs on the engine that runs the projection. Default: off, sessions are kept for ever."`
	RetainAction string        `name:"retain-action" env:"ENGINE_RETAIN_ACTION" default:"delete" enum:"delete,erase,compact" help:"What retention does to an idle session: 'delete' (the events stay in the log, reads answer 410 deleted), 'erase' (deleted, then its events purged with an audit record, as engine erase; needs the engine's privileged connection) or 'compact' (its events replaced by one snapshot event of the same state and purged, with an audit record; the session stays usable; needs the same connection)."`
	RetainTick   time.Duration `name:"retain-tick" env:"ENGINE_RETAIN_TICK" default:"1m" help:"Interval of retention ticks."`
	RetainBatch  int           `name:"retain-batch" env:"ENGINE_RETAIN_BATCH" default:"1000" help:"Sessions one retention tick examines at most; the next tick resumes where it stopped."`

	EraseTakeover time.Duration `name:"erase-takeover" env:"ENGINE_ERASE_TAKEOVER" default:"30s" help:"An erase is recorded step by step in the audit stream, and the engine that runs the projection finishes one a crash interrupted: at once when this process began it, and once its last record is this old when another process did (one in flight writes its next record well within it). It looks at start and every --erase-takeover (at most every minute)."`

	RegistryKeep      int           `name:"registry-keep" env:"ENGINE_REGISTRY_KEEP" default:"20" help:"Registry history: keep the newest N registry versions plus every version an open turn or a session's last checkpoint references; the others are purged (through the privileged connection of erases), once at start-up and after each registry change, on the engine that runs the projection. History and explain of a point under a pruned version say 'registry version X pruned'. 0 keeps every version."`
	RegistryPruneTick time.Duration `name:"registry-prune-tick" env:"ENGINE_REGISTRY_PRUNE_TICK" default:"30s" help:"How often the registry history is looked at for a change to prune after (--registry-keep)."`
}

// retention maps the --retain-* flags to the server's fields: an empty
// --retain-idle is off.
func (c *serveCmd) retention() (idle time.Duration, err error) {
	if c.RetainIdle == "" {
		return 0, nil
	}
	idle, err = server.ParseRetainDuration(c.RetainIdle)
	if err != nil {
		return 0, usage(fmt.Errorf("--retain-idle: %w (or leave it unset to keep sessions for ever)", err))
	}
	if c.RetainTick <= 0 {
		return 0, usage(fmt.Errorf("--retain-tick %v: want a positive interval such as 1m", c.RetainTick))
	}
	if c.RetainBatch <= 0 {
		return 0, usage(fmt.Errorf("--retain-batch %d: want 1 or more, such as 1000", c.RetainBatch))
	}
	return idle, nil
}

// Run maps the flags to a server.Config and serves until ctx ends.
func (c *serveCmd) Run(ctx context.Context, log zerolog.Logger) error {
	reg, err := loadRegistry(c.Registry)
	if err != nil {
		return err
	}
	acfg, err := c.apiConfig(api.Config{SubjectPrefix: c.Prefix + ".api", EraseChannel: c.EraseChan, DeleteChannels: c.DeleteChans, Logger: log.With().Str("component", "api").Logger()}, c.HTTP)
	if err != nil {
		return err
	}
	var minFree uint64 // the embedded server's disk only
	if c.NATS == "" {
		if minFree, err = parseBytes(c.MinFree); err != nil {
			return fmt.Errorf("--min-free: %w", err)
		}
	}
	retainIdle, err := c.retention()
	if err != nil {
		return err
	}
	if c.RegistryKeep < 0 {
		return usage(fmt.Errorf("--registry-keep %d: want 1 or more versions kept, or 0 to keep every version", c.RegistryKeep))
	}
	if c.RegistryPruneTick <= 0 {
		return usage(fmt.Errorf("--registry-prune-tick %v: want a positive interval such as 30s", c.RegistryPruneTick))
	}
	maxConns := c.HTTPMaxConn
	if maxConns <= 0 {
		maxConns = -1 // no bound
	}
	return server.Run(ctx, server.Config{
		Store:             c.serveStore(),
		Logger:            log,
		Registry:          reg,
		RegistryKV:        c.RegistryKV,
		NoProjection:      !c.Project,
		API:               acfg,
		NATSAPIUser:       c.NATSAPIUser,
		NATSAPIPassword:   c.NATSAPIPassword,
		NATSEraseUser:     c.NATSEraseUser,
		NATSErasePassword: c.NATSErasePassword,
		Actors:            c.actorFlags.config(),
		HTTP:              c.HTTP,
		HTTPMaxConns:      maxConns,
		HTTPReadTimeout:   orNone(c.HTTPRead),
		ReadyFile:         c.ReadyFile,
		MinFree:           orNone(int64(min(minFree, math.MaxInt64))), // '0' disables the minimum
		MaxProjectionLag:  orNone(int64(min(c.MaxLag, math.MaxInt64))),
		ShutdownTimeout:   orNone(c.Shutdown),
		RetainIdle:        retainIdle,
		RetainAction:      c.RetainAction,
		RetainTick:        c.RetainTick,
		RetainBatch:       c.RetainBatch,
		EraseTakeover:     c.EraseTakeover,
		RegistryKeep:      c.RegistryKeep,
		RegistryPruneTick: c.RegistryPruneTick,
		Embeddings:        c.embeddingFlags.config(),
	})
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

// orNone maps a flag's explicit 0 (none: no lag, no grace, no limit) to
// the Config's negative "none": the Config's 0 is its default.
func orNone[T int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// parseBytes reads a size: a number with an optional B, KiB, MiB, GiB,
// KB, MB or GB suffix.
func parseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 64MiB, 1GiB, 0)", s)
	}
	return n * mult, nil
}
