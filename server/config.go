package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/embedding"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Defaults of a zero Config and Store.
const (
	DefaultData             = "./engine-data"
	DefaultPrefix           = "tools"
	DefaultListen           = "127.0.0.1:0" // loopback, a random port
	DefaultMinFree          = 64 << 20      // 64 MiB
	DefaultMaxProjectionLag = 10000
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultHTTPMaxConns     = 512
	DefaultHTTPReadTimeout  = 15 * time.Second
)

// Store says where the event log is and how to reach it: an external
// NATS server or cluster (NATS), or else an embedded server on the data
// directory Data. The zero value starts an embedded server on ./engine-data
// listening on a random loopback port, with prefix tools and one replica.
// Error messages name the `engine serve` flag of a bad field.
type Store struct {
	// NATS is the external server or cluster (comma-separated URLs);
	// empty: start the embedded server. With NATS, NATSUser (or
	// NATSCreds/NATSNKey) is the login; empty, the engine user of Data's
	// nats-users.json is used when there is one.
	NATS         string
	NATSUser     string // also the embedded server's engine user (required on a non-loopback Listen)
	NATSPassword string
	NATSCreds    string // credentials (JWT + nkey) file for NATS
	NATSNKey     string // nkey seed file for NATS
	TLSCA        string // CA certificate to verify the NATS server
	TLSCert      string // client certificate (with TLSKey)
	TLSKey       string

	// Data is the embedded server's data directory. Default ./engine-data.
	Data string
	// ServerConfig is a nats-server config file for the embedded server
	// (accounts, users, TLS); empty: generated users in Data.
	ServerConfig string
	// Prefix is the subject prefix (events on <Prefix>.events.<session>).
	// Default tools.
	Prefix string
	// Replicas of the stream and KV buckets. Default 1.
	Replicas int
	// Partitions spreads the sessions over this many event streams, each
	// with its own leader (serve only, on an external cluster: NATS set);
	// 0 or 1: one event stream. The store keeps the number its first
	// engine chose, and refuses another.
	Partitions int
	// Listen is the embedded server's host:port (port 0: random).
	// Default 127.0.0.1:0.
	Listen string
	// Sync is the embedded server's fsync policy, "interval" (default) or
	// "always".
	Sync string
	// SyncEvery is the embedded server's sync interval (nats-server's
	// sync_interval; default 2m): fsyncs under Sync "interval", and the
	// compaction of message blocks that purges emptied, under either.
	SyncEvery time.Duration
	// AcceptStoreDamage starts on an embedded store the start-up check
	// found damaged, dropping only the damaged bytes of its blocks and
	// recording the loss; without it such a store is refused.
	AcceptStoreDamage bool
	// Admin connects as the admin of Data's generated users (stream
	// repair) instead of the engine user.
	Admin bool
	// RequireStream refuses a store without the event stream instead of
	// creating an empty one (rebuild, stream repair).
	RequireStream bool
	// SharedBuckets opens the log only for the buckets every partition
	// shares (registry push, actor forget): a store of several event
	// streams opens its first partition instead of being refused.
	SharedBuckets bool
}

// withDefaults fills the zero fields.
func (s Store) withDefaults() Store {
	if s.Data == "" {
		s.Data = DefaultData
	}
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.Replicas == 0 {
		s.Replicas = 1
	}
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if s.Sync == "" {
		s.Sync = string(jetstream.SyncInterval)
	}
	return s
}

// LeaseOwner names this process in the projection runner's lease. With
// the embedded server the data directory's lock already makes the process
// the only one on it, so the name is the directory's: a restart after a
// crash takes its own lease back at once instead of waiting for it to
// expire. Against NATS: "" (the projection's default: host, pid and a
// random part).
func (s Store) LeaseOwner() string {
	if s.NATS != "" {
		return ""
	}
	data := s.Data
	if data == "" {
		data = DefaultData
	}
	abs, err := filepath.Abs(data)
	if err != nil {
		abs = data
	}
	host, _ := os.Hostname()
	return "engine@" + host + ":" + abs
}

// Config is what `engine serve` runs: the store, the API's transports
// (NATS micro, HTTP), the projection and the operator checks. The zero
// value serves on an embedded server (see Store) with the default
// registry, takes part in the projection, and serves no HTTP.
type Config struct {
	Store

	// Logger receives the structured logs. The zero Logger discards them.
	Logger zerolog.Logger
	// Registry is the registry served; nil: resolver.Default().
	Registry *resolver.Registry
	// RegistryKV serves the registry stored in the <PREFIX>_REGISTRY
	// bucket (seeded with Registry when empty) and follows its changes.
	RegistryKV bool
	// NoProjection never folds the log here, only reads the views; by
	// default the engine takes part in the election of the one runner.
	NoProjection bool

	// API configures both transports (tokens, hosts, origins, channels,
	// request timeout, logger: its zero Logger discards, so give it one,
	// e.g. Logger with component=api); SubjectPrefix defaults to
	// <Prefix>.api. Run sets Observe to the metrics' request observer.
	API api.Config
	// NATSAPIUser, when set, gives the NATS micro service its own login
	// (with NATSAPIPassword) instead of the engine's connection.
	NATSAPIUser     string
	NATSAPIPassword string
	// NATSEraseUser, when set, is the login (with NATSErasePassword) of
	// the connection that purges erased sessions: a user allowed to
	// purge the event stream, which no channel is. Default: the embedded
	// server's admin, or the engine's own connection on --nats.
	NATSEraseUser     string
	NATSErasePassword string
	// Actors is how actors are stored (serve --actor-mode,
	// --actor-key-file): plain by default.
	Actors ActorConfig

	// HTTP is the host:port of the HTTP API, /metrics, /healthz, /readyz
	// and the inspector; empty: no HTTP. The listener opens first, so the
	// probes answer while the engine waits for NATS.
	HTTP string
	// HTTPMaxConns bounds the open HTTP connections (default 512;
	// negative: no bound).
	HTTPMaxConns int
	// HTTPReadTimeout is the time a client has to send a whole request
	// (default 15 s; negative: no limit).
	HTTPReadTimeout time.Duration

	// ReadyFile, when set, receives {"nats_url","http_addr","stream","pid"}
	// as JSON once serving.
	ReadyFile string
	// MinFree is the free space the embedded server's disk must keep:
	// below it appends are refused with storage_full and /readyz fails.
	// 0: DefaultMinFree; negative: no minimum (a store that failed a
	// write or disabled JetStream still refuses appends).
	MinFree int64
	// MaxProjectionLag is how many events the projection may be behind
	// the log, once caught up, before /readyz fails (default 10000;
	// negative: none).
	MaxProjectionLag int64
	// ShutdownTimeout is the grace period of in-flight requests when ctx
	// ends (default 10 s; negative: none).
	ShutdownTimeout time.Duration

	// RetainIdle, when positive, deletes (or erases, or compacts) the
	// sessions whose last event is older (serve --retain-idle); 0:
	// sessions are kept for ever.
	RetainIdle time.Duration
	// RetainAction is "delete" (default: a SessionDeleted, the events
	// stay), "erase" (deleted and purged, with the audit record) or
	// "compact" (the events replaced by one snapshot of the same state,
	// then purged, with an audit record; the session stays).
	RetainAction string
	// RetainTick is the interval of retention ticks (default 1 min).
	RetainTick time.Duration
	// RetainBatch bounds the sessions one tick examines (default 1000).
	RetainBatch int
	// EraseTakeover is how old the last audit record of an erase another
	// process began (and a crash interrupted) must be before this engine
	// finishes it (default 30 s; service.Config.EraseTakeover).
	EraseTakeover time.Duration

	// RegistryKeep, when positive, prunes the registry history
	// (serve --registry-keep): the newest RegistryKeep versions are kept,
	// plus every version an open turn or a session's last checkpoint
	// references; 0 keeps every version.
	RegistryKeep int
	// RegistryPruneTick is how often the registry history is looked at for
	// a change to prune after (default 30 s).
	RegistryPruneTick time.Duration

	// Embeddings, with URL and Model set (serve --embeddings-url,
	// --embeddings-model), has tool_search rank queries by the operator's
	// embedding model fused with keywords; its vectors are kept in the
	// <PREFIX>_EMBEDDINGS bucket. Run sets its Logger and Hooks. Zero:
	// keywords only.
	Embeddings embedding.Config
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	c.Store = c.Store.withDefaults()
	if c.Registry == nil {
		c.Registry = resolver.Default()
	}
	if c.API.SubjectPrefix == "" {
		c.API.SubjectPrefix = c.Prefix + ".api"
	}
	if c.HTTPMaxConns == 0 {
		c.HTTPMaxConns = DefaultHTTPMaxConns
	}
	if c.HTTPReadTimeout == 0 {
		c.HTTPReadTimeout = DefaultHTTPReadTimeout
	}
	if c.MinFree == 0 {
		c.MinFree = DefaultMinFree
	}
	if c.MaxProjectionLag == 0 {
		c.MaxProjectionLag = DefaultMaxProjectionLag
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.RetainTick == 0 {
		c.RetainTick = service.DefaultRetentionTick
	}
	if c.RegistryPruneTick == 0 {
		c.RegistryPruneTick = service.DefaultRegistryPruneTick
	}
	return c
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	switch jetstream.SyncPolicy(c.Sync) {
	case "", jetstream.SyncInterval, jetstream.SyncAlways:
	default:
		errs = append(errs, fmt.Errorf("--sync %q: want interval or always", c.Sync))
	}
	if c.Replicas < 0 {
		errs = append(errs, fmt.Errorf("--replicas %d: want 1 or more", c.Replicas))
	}
	switch {
	case c.Partitions < 0 || c.Partitions > events.MaxPartitions:
		errs = append(errs, fmt.Errorf("--partitions %d: want 1 (one event stream) to %d", c.Partitions, events.MaxPartitions))
	case c.Partitions > 1 && c.NATS == "":
		errs = append(errs, fmt.Errorf("--partitions %d needs --nats, the URL of a cluster: partitions spread the event streams' leaders over its nodes, and the one embedded server would lead them all", c.Partitions))
	}
	if err := c.Actors.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RetainIdle < 0 {
		errs = append(errs, fmt.Errorf("--retain-idle %v: want a positive duration such as 90d (or none: keep sessions)", c.RetainIdle))
	}
	switch service.RetentionAction(c.RetainAction) {
	case "", service.RetainDelete, service.RetainErase, service.RetainCompact:
	default:
		errs = append(errs, fmt.Errorf("--retain-action %q: want delete, erase or compact", c.RetainAction))
	}
	if c.EraseTakeover < 0 {
		errs = append(errs, fmt.Errorf("--erase-takeover %v: want a positive duration such as 30s", c.EraseTakeover))
	}
	if c.RetainTick < 0 {
		errs = append(errs, fmt.Errorf("--retain-tick %v: want a positive interval such as 1m", c.RetainTick))
	}
	if c.RetainBatch < 0 {
		errs = append(errs, fmt.Errorf("--retain-batch %d: want 1 or more", c.RetainBatch))
	}
	if c.RegistryKeep < 0 {
		errs = append(errs, fmt.Errorf("--registry-keep %d: want 1 or more versions kept, or 0 to keep every version", c.RegistryKeep))
	}
	if c.RegistryPruneTick < 0 {
		errs = append(errs, fmt.Errorf("--registry-prune-tick %v: want a positive interval such as 30s", c.RegistryPruneTick))
	}
	if err := c.validEmbeddings(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
