package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig says how to reach a NATS server or cluster. The zero value with
// a URL is usable.
type ConnConfig struct {
	// URL is one or more comma-separated server URLs (nats://, tls://).
	URL string
	// Name is the client connection name shown by the server. Default "engine".
	Name string
	// User and Password authenticate with a user/password pair.
	User, Password string
	// Token authenticates with a token.
	Token string
	// CredsFile is a JWT + nkey credentials file (decentralized auth).
	CredsFile string
	// NKeySeedFile is a file holding an nkey seed (SU...).
	NKeySeedFile string
	// TLSCAFile, TLSCertFile and TLSKeyFile configure TLS: a CA to verify
	// the server and, optionally, a client certificate.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// ConnectTimeout bounds the initial connection (default 10s).
	ConnectTimeout time.Duration
	// OnStatus, when set, is told about disconnects, reconnects, the
	// close, and asynchronous errors such as a refused publish.
	OnStatus func(event string, err error)
}

// Validate reports every problem of the configuration at once.
func (c ConnConfig) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("nats connection: URL is empty: give --nats nats://host:4222 or leave it out for the embedded server"))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("nats connection: TLS cert %q and key %q must be given together", c.TLSCertFile, c.TLSKeyFile))
	}
	n := 0
	for _, set := range []bool{c.User != "", c.Token != "", c.CredsFile != "", c.NKeySeedFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("nats connection: give only one of user/password, token, creds file, nkey seed file"))
	}
	return errors.Join(errs...)
}

// Connect opens a connection that reconnects by itself forever (with
// jittered back-off), so that a server restart or cluster failover does
// not need the engine to restart.
func Connect(ctx context.Context, cfg ConnConfig) (*nats.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = "engine"
	}
	timeout := cfg.ConnectTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		// No publish is buffered across a reconnect: a write
		// reported as failed must not be stored later. While disconnected
		// a publish fails at once with nats.ErrReconnectBufExceeded.
		nats.ReconnectBufSize(-1),
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("read nkey seed %s: %w", cfg.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}
	if cfg.OnStatus != nil {
		f := cfg.OnStatus
		opts = append(opts,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { f("disconnected", err) }),
			nats.ReconnectHandler(func(*nats.Conn) { f("reconnected", nil) }),
			nats.ClosedHandler(func(*nats.Conn) { f("closed", nil) }),
			// A refused publish or subscription (permissions) is reported
			// here rather than printed by the client library.
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { f("error", err) }),
		)
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.URL, err)
	}
	return nc, nil
}
