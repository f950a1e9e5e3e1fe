package jetstream

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// SyncPolicy says when the embedded server's file store fsyncs.
type SyncPolicy string

const (
	// SyncInterval fsyncs on the server's timer (nats-server's default
	// sync_interval, 2 minutes). Acknowledged writes newer than the last
	// fsync can be lost on power loss (not on a process crash).
	SyncInterval SyncPolicy = "interval"
	// SyncAlways fsyncs every write before it is acknowledged: nothing
	// acknowledged is lost on power loss, at a lower append rate.
	SyncAlways SyncPolicy = "always"
)

// EmbeddedConfig configures the embedded NATS server. The zero value is
// usable: loopback, a random port, a temporary data directory is NOT
// chosen for you (DataDir is required), fsync on interval.
type EmbeddedConfig struct {
	// DataDir holds JetStream's files. Required.
	DataDir string
	// Host to listen on. Default 127.0.0.1. A non-loopback host requires
	// User and Password (the engine refuses to expose an open server).
	Host string
	// Port to listen on. 0 picks a random free port.
	Port int
	// User and Password, when set, are required of every client.
	User, Password string
	// Credentials, when set (and ConfigFile is not), are the server's
	// users instead of User: an engine user that may not delete, purge or
	// update streams, and an admin (see LoadOrCreateCredentials); a
	// non-loopback Host still needs User and Password (or ConfigFile) set.
	// Without Credentials, User or ConfigFile the server lets any local
	// client do anything: tests only.
	Credentials *Credentials
	// Sync is the fsync policy. Default SyncInterval.
	Sync SyncPolicy
	// SyncEvery overrides the server's sync interval (default 2m): the
	// fsync interval under SyncInterval, and, under either policy, how
	// often the server compacts message blocks that deletes emptied.
	SyncEvery time.Duration
	// ServerName names the server (default "engine").
	ServerName string
	// ConfigFile, when set, is a nats-server configuration file whose
	// options (accounts, users, permissions, TLS) are loaded first; the
	// fields above override what they set.
	ConfigFile string
	// Logger receives the server's own log lines; nil keeps them quiet.
	Logger server.Logger
	// Command names this process in DataDir's lock file (e.g. "engine
	// serve"); default the program and its first argument.
	Command string
}

// Validate reports every problem of the configuration at once.
func (c EmbeddedConfig) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("embedded server: DataDir is empty: give a data directory (--data DIR)"))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("embedded server: port %d out of range 0..65535", c.Port))
	}
	switch c.Sync {
	case "", SyncInterval, SyncAlways:
	default:
		errs = append(errs, fmt.Errorf("embedded server: sync policy %q unknown: use %q or %q", c.Sync, SyncInterval, SyncAlways))
	}
	if c.SyncEvery < 0 {
		errs = append(errs, fmt.Errorf("embedded server: sync interval %v is negative: give a positive duration such as 2m (0: the default)", c.SyncEvery))
	}
	host := c.host()
	if !isLoopback(host) && (c.User == "" || c.Password == "") && c.ConfigFile == "" {
		errs = append(errs, fmt.Errorf("embedded server: host %q is not loopback and no authentication is set: set a user and password or a config file with users, or listen on 127.0.0.1", host))
	}
	return errors.Join(errs...)
}

func (c EmbeddedConfig) host() string {
	if c.Host == "" {
		return "127.0.0.1"
	}
	return c.Host
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Embedded is a running embedded nats-server.
type Embedded struct {
	srv        *server.Server
	lock       *DataLock
	dataDir    string                 // as configured: the server adds "jetstream" itself
	js         server.JetStreamConfig // as started, to re-enable JetStream
	writeFault atomic.Pointer[string] // the store's last write error (a full disk), until JetStream restarts
	enabledAt  atomic.Int64           // unix nanos of the last (re)start of JetStream

	faultMu sync.Mutex
	faultCh chan struct{} // closed (and replaced) when a write fault is recorded
}

// closedCh is returned by Faults while a fault stands.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// jetStreamSettle is how long after (re)starting JetStream the engine
// waits before it shuts JetStream down again. EnableJetStream starts API
// workers that read the server's JetStream pointer when they first run:
// one that first runs after a shutdown keeps nil and the next API
// request crashes the process with a nil dereference (nats-server
// v2.15.2 jetstream_api.go:1069, processJSAPIRoutedRequests). That
// killed the engine in the TestDiskFull flake: the restart after
// ENOSPC found no stream (row 1's nested directory), shut JetStream down
// at once and enabled it again.
const jetStreamSettle = 5 * time.Second

// ErrJetStreamSettling is matched by RestartJetStream and
// ReenableJetStream when a running JetStream (re)started less than 5 s
// ago would have to be shut down: try again later.
var ErrJetStreamSettling = errors.New("JetStream restarted moments ago")

// EmbeddedMaxPayload is the embedded server's max_payload when its
// config file sets none.
const EmbeddedMaxPayload = 8 << 20

// StartEmbedded starts a nats-server with JetStream in cfg.DataDir and waits
// until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		fileOpts, err := server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("load server config %s: %w", cfg.ConfigFile, err)
		}
		opts = fileOpts
		if !isLoopback(cfg.host()) && len(opts.Users) == 0 && len(opts.Nkeys) == 0 && opts.Accounts == nil && cfg.User == "" {
			return nil, fmt.Errorf("embedded server: host %q is not loopback and config %s defines no users: add users or listen on 127.0.0.1", cfg.host(), cfg.ConfigFile)
		}
	}
	// One owner per data directory: a second server
	// on a live store forks the log.
	lock, err := LockDataDir(cfg.DataDir, cfg.Command)
	if err != nil {
		return nil, err
	}
	// The store an old in-process restart moved away: the
	// server would start an empty one beside it.
	if err := nestedStore(cfg.DataDir); err != nil {
		lock.Release()
		return nil, err
	}
	if cfg.Port != 0 {
		// nats-server only logs a taken port and never becomes ready: say
		// so at once instead of after the readiness timeout.
		addr := net.JoinHostPort(cfg.host(), strconv.Itoa(cfg.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lock.Release()
			return nil, fmt.Errorf("embedded server: cannot listen on %s: %w (another engine or NATS server there? choose another --listen, or 127.0.0.1:0 for a random port)", addr, err)
		}
		ln.Close()
	}
	opts.Host = cfg.host()
	opts.Port = cfg.Port
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.MaxPayload == 0 {
		// A registry of about 10,000 MCP tools is some 8 MB of JSON: its
		// native rendering, its registry history record and a registry
		// push each travel as one message. 8 MiB is the most the NATS
		// docs recommend; a config file may set another.
		opts.MaxPayload = EmbeddedMaxPayload
	}
	opts.JetStream = true
	opts.StoreDir = filepath.Clean(cfg.DataDir)
	if opts.JetStreamMaxStore == 0 {
		// Left unset, nats-server caps its store at 75% of the disk space
		// free when it starts, for as long as it runs: started on a full
		// disk it refuses every write ("insufficient storage resources")
		// after space returns, until a restart. The disk's whole size
		// bounds the store instead; the free-space guard (serve
		// --min-free) keeps the disk from filling.
		opts.JetStreamMaxStore = storeLimit(opts.StoreDir)
	}
	opts.NoSigs = true
	opts.NoLog = false // the fault watch below reads the server's errors
	opts.ServerName = cfg.ServerName
	if opts.ServerName == "" {
		opts.ServerName = "engine"
	}
	switch {
	case cfg.Credentials != nil && cfg.ConfigFile == "":
		opts.Users = cfg.Credentials.users()
	case cfg.User != "":
		opts.Username, opts.Password = cfg.User, cfg.Password
	}
	opts.SyncAlways = cfg.Sync == SyncAlways
	if cfg.SyncEvery > 0 {
		// Under SyncAlways the interval still paces the server's block
		// maintenance (compacting blocks that deletes emptied).
		opts.SyncInterval = cfg.SyncEvery
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("create embedded server: %w", err)
	}
	e := &Embedded{lock: lock, dataDir: opts.StoreDir, faultCh: make(chan struct{})}
	// A file store that fails a write (ENOSPC) refuses every later write
	// until it is loaded again: watch for it.
	srv.SetLogger(newFaultWatch(cfg.Logger, e.recordFault), false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		lock.Release()
		return nil, fmt.Errorf("embedded server on %s:%d not ready after 30s (is the port taken or the data directory %s locked by another engine?)", opts.Host, cfg.Port, cfg.DataDir)
	}
	e.srv = srv
	e.enabledAt.Store(time.Now().UnixNano())
	if jc := srv.JetStreamConfig(); jc != nil {
		e.js = *jc
	}
	return e, nil
}

// ClientURL is the URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Server exposes the underlying server (for tests and monitoring).
func (e *Embedded) Server() *server.Server { return e.srv }

// JetStreamEnabled reports whether JetStream runs: the server disables it
// by itself when a write fails for lack of space.
func (e *Embedded) JetStreamEnabled() bool { return e.srv.JetStreamEnabled() }

// WriteFault is the store's last write error (e.g. "no space left on
// device") since JetStream (re)started, or "": after one, the file store
// refuses every write until JetStream is restarted.
func (e *Embedded) WriteFault() string {
	if p := e.writeFault.Load(); p != nil {
		return *p
	}
	return ""
}

// Faults returns a channel closed when the store records a write fault
// or the server disables JetStream (out of space or resources), or
// already closed while one stands (until JetStream restarts). An append
// waiting for its acknowledgement then stops waiting: nats-server never
// answers a publish whose write failed.
func (e *Embedded) Faults() <-chan struct{} {
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	if e.writeFault.Load() != nil || !e.srv.JetStreamEnabled() {
		return closedCh
	}
	return e.faultCh
}

// recordFault records the store's write error and wakes the waiters of
// Faults.
func (e *Embedded) recordFault(msg string) {
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	e.writeFault.Store(&msg)
	close(e.faultCh)
	e.faultCh = make(chan struct{})
}

// ReenableJetStream restarts JetStream, with the configuration it started
// with, after the server disabled it or its store hit a write error (a
// full disk whose space has returned): the streams are
// loaded again from disk and accept writes. It does nothing when neither
// happened.
func (e *Embedded) ReenableJetStream() error {
	if e.srv.JetStreamEnabled() && e.WriteFault() == "" {
		return nil
	}
	return e.RestartJetStream()
}

// RestartJetStream shuts JetStream down (when it runs) and starts it
// again with the configuration it started with, loading every stream
// from disk. It does not shut down a JetStream (re)started less than 5 s
// ago: it then does nothing and returns an error matching
// ErrJetStreamSettling (see jetStreamSettle).
func (e *Embedded) RestartJetStream() error {
	if e.srv.JetStreamEnabled() {
		if since := time.Since(time.Unix(0, e.enabledAt.Load())); since < jetStreamSettle {
			return fmt.Errorf("restart JetStream: %w (%s ago): not before %s", ErrJetStreamSettling, since.Round(time.Millisecond), jetStreamSettle)
		}
		if err := e.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("restart JetStream: %w", err)
		}
	}
	// The running configuration's StoreDir is <data>/jetstream, and
	// EnableJetStream appends "jetstream" to what it is given: handing it
	// back moved the store to <data>/jetstream/jetstream, and the next
	// start served an empty stream. Give the data directory.
	cfg := e.js
	cfg.StoreDir = e.dataDir
	e.enabledAt.Store(time.Now().UnixNano())
	if err := e.srv.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("re-enable JetStream: %w", err)
	}
	e.writeFault.Store(nil)
	return nil
}

// faultWatch passes the server's log lines on (when inner is set) and
// records a store write error, or JetStream disabled for lack of space
// or permission.
type faultWatch struct {
	server.Logger // the server's log lines go on to it
	record        func(msg string)
}

// newFaultWatch passes the server's log lines on to inner (nil: nowhere)
// and hands record the store faults among them.
func newFaultWatch(inner server.Logger, record func(msg string)) faultWatch {
	if inner == nil {
		inner = discardLogger{}
	}
	return faultWatch{Logger: inner, record: record}
}

func (f faultWatch) Warnf(format string, v ...any) {
	f.watch(format, v...)
	f.Logger.Warnf(format, v...)
}

func (f faultWatch) Errorf(format string, v ...any) {
	f.watch(format, v...)
	f.Logger.Errorf(format, v...)
}

// discardLogger drops a server's log lines.
type discardLogger struct{}

func (discardLogger) Noticef(string, ...any) {}
func (discardLogger) Warnf(string, ...any)   {}
func (discardLogger) Fatalf(string, ...any)  {}
func (discardLogger) Errorf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any)  {}
func (discardLogger) Tracef(string, ...any)  {}

func (f faultWatch) watch(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "write error") || strings.Contains(msg, "no space left") || strings.Contains(msg, "out of resources") ||
		strings.Contains(msg, "will be DISABLED") || strings.Contains(msg, "disabling JetStream") {
		f.record(msg)
	}
}

// Shutdown stops the server gracefully, flushing the file store, and waits
// for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Release()
}

// ConfigLogin reads a nats-server configuration file and returns the
// users it defines and whether a client must log in as one of them (users
// or nkeys and no no_auth_user): the engine then needs its user named
// (connecting without one failed as "io: read/write on
// closed pipe").
func ConfigLogin(path string) (users []string, needsLogin bool, err error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("load server config %s: %w", path, err)
	}
	for _, u := range opts.Users {
		users = append(users, u.Username)
	}
	return users, (len(opts.Users) > 0 || len(opts.Nkeys) > 0) && opts.NoAuthUser == "", nil
}

// storeLimit is the store limit of an embedded server on dir's disk: the
// disk's size, at least 1 TiB (nats-server's own guess when it cannot
// measure).
func storeLimit(dir string) int64 {
	const floor = 1 << 40
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return floor
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return floor
	}
	return max(int64(min(st.Blocks*uint64(st.Bsize), math.MaxInt64)), floor)
}
