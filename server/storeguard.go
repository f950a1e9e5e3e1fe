package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// appendGuard is asked before each append to the embedded store: the
// disk below --min-free, a store that failed a write or JetStream
// disabled (the append would wait for an acknowledgement that
// never comes) answer at once with ErrStorageFull, and a log shorter
// than what was acknowledged takes no appends.
func (c *store) appendGuard(disk *jetstream.DiskGuard) func() error {
	return func() error {
		if err := disk.Check(); err != nil {
			return err
		}
		if srv := c.embedded; srv != nil {
			if f := srv.WriteFault(); f != "" {
				return fmt.Errorf("%w: the store failed a write (%s): appends are refused until the disk has space again and the engine restarts JetStream", logport.ErrStorageFull, f)
			}
			if !srv.JetStreamEnabled() {
				return fmt.Errorf("%w: JetStream is disabled on the embedded server (out of space or resources): appends are refused until the disk has space again and the engine enables it", logport.ErrStorageFull)
			}
		}
		if err := c.acked.refuse(); err != nil {
			// 507 like a full disk: definite (nothing written, no retry
			// loop), and the message names the gap and the fix.
			return storeRefusal{err}
		}
		return nil
	}
}

// storeFaults is the embedded store's fault signal for the log's appends
// : an append in flight when the store fails a write answers
// at once instead of waiting for an acknowledgement that never comes.
// Against --nats there is none (nil: never closed).
func (c *store) storeFaults() <-chan struct{} {
	if c.embedded == nil {
		return nil
	}
	return c.embedded.Faults()
}

// watchAcked starts the acknowledged-watermark record of the embedded
// store's data directory; nothing against --nats (the data
// directory is the server's, elsewhere).
func (c *store) watchAcked(ctx context.Context, jlog *jetstream.Log, log zerolog.Logger) error {
	if c.embedded == nil {
		return nil
	}
	a, err := startWatermark(ctx, c.Data, jlog, log.With().Str("component", "watermark").Logger())
	if err != nil {
		return err
	}
	c.acked = a
	return nil
}

// ackedCheck is the readiness check of the watermark: the log holds all
// that was acknowledged.
func (c *store) ackedCheck() health.Check {
	return health.Check{Name: "acknowledged", Fn: c.acked.check}
}

// storeRefusal refuses an append as the store's (matching
// logport.ErrStorageFull: 507, definite) with its own message.
type storeRefusal struct{ err error }

func (r storeRefusal) Error() string   { return r.err.Error() }
func (r storeRefusal) Unwrap() []error { return []error{logport.ErrStorageFull, r.err} }

// checkConfigLogin refuses, before the embedded server starts, a
// --server-config whose users require a login when no --nats-user names
// the engine's.
func (c *store) checkConfigLogin() error {
	if c.ServerConfig == "" || c.NATSUser != "" || os.Getenv("ENGINE_NATS_USER") != "" {
		return nil
	}
	users, needs, err := jetstream.ConfigLogin(c.ServerConfig)
	if err != nil || !needs {
		return err
	}
	return fmt.Errorf("--server-config %s defines users %v and no no_auth_user: name the engine's own login with --nats-user and --nats-password (or ENGINE_NATS_USER and ENGINE_NATS_PASSWORD), e.g. the user engine of deploy/nats-server.conf", c.ServerConfig, users)
}

// embeddedConnectError explains a failed in-process connection: with
// --server-config it is the login (an in-process connection the server
// refuses ends as "read/write on closed pipe").
func (c *store) embeddedConnectError(err error) error {
	if c.ServerConfig != "" {
		return fmt.Errorf("connect to the embedded server of --server-config %s as user %q: %w (is that user, with that --nats-password, in the config?)", c.ServerConfig, c.NATSUser, err)
	}
	return fmt.Errorf("connect to embedded server: %w", err)
}

// requireStream refuses, for commands that work on an existing store
// (rebuild, stream repair), a connection that finds no event stream
// : opening the log would create an empty one, e.g. in the
// $G account beside the real store of a directory served with
// --server-config. The error names the stream looked for and the streams
// the data directory holds, by account.
func (c *store) requireStream(ctx context.Context, nc *nats.Conn) error {
	if !c.RequireStream {
		return nil
	}
	name := jetstream.EventStreamName(c.Prefix)
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	_, err = js.Stream(ctx, name)
	if !errors.Is(err, natsjs.ErrStreamNotFound) {
		return err
	}
	who := "the data directory's engine user"
	if c.NATSUser != "" {
		who = "user " + c.NATSUser
	}
	found, _ := filepath.Glob(filepath.Join(c.Data, "jetstream", "*", "streams", "*"))
	var have []string
	for _, f := range found {
		have = append(have, filepath.Base(filepath.Dir(filepath.Dir(f)))+"/"+filepath.Base(f))
	}
	hint := "pass the --data of the engine"
	if len(have) > 0 {
		hint = "a store served with --server-config is in that config's account: pass the same --server-config and --nats-user/--nats-password as engine serve (or the matching --prefix)"
	}
	return fmt.Errorf("data dir %s: no event stream %s in the account of %s; found (account/stream): %v: refusing to create an empty store; %s",
		c.Data, name, who, orEmpty(have), hint)
}

func orEmpty(s []string) any {
	if len(s) == 0 {
		return "none"
	}
	return s
}
