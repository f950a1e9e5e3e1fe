package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/jetstream"
)

// clientNATSFlags let a client command talk to the engine over NATS
// instead of HTTP: --nats URL (or NATS_URL), or a natscli context.
type clientNATSFlags struct {
	NATS         string `name:"nats" env:"NATS_URL" placeholder:"URL" help:"Talk to the engine over NATS at URL (the micro service tools.api.<channel>.<op>) instead of HTTP."`
	NATSContext  string `name:"context" env:"NATS_CONTEXT" placeholder:"NAME" help:"Use this natscli context (~/.config/nats/context/NAME.json: url, user, password, creds, nkey, TLS) for NATS."`
	NATSUser     string `name:"nats-user" env:"NATS_USER" help:"NATS user (default: the engine user of --data's nats-users.json, for an embedded server)."`
	NATSPassword string `name:"nats-password" env:"NATS_PASSWORD" help:"NATS password for --nats-user."`
	NATSCreds    string `name:"nats-creds" env:"NATS_CREDS" type:"existingfile" help:"NATS credentials (JWT + nkey) file."`
	Data         string `name:"data" default:"./engine-data" env:"ENGINE_DATA" type:"path" help:"Data directory of a local engine serve, whose nats-users.json gives the NATS user when none is given."`
}

// natsContext is the part of a natscli context file the engine uses.
type natsContext struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	Token    string `json:"token"`
	CA       string `json:"ca"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
}

// loadNATSContext reads the natscli context name ("" is none).
func loadNATSContext(name string) (natsContext, error) {
	var nctx natsContext
	if name == "" {
		return nctx, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return nctx, fmt.Errorf("natscli context %q: %w", name, err)
	}
	path := filepath.Join(dir, "nats", "context", name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nctx, fmt.Errorf("natscli context %q: %w", name, err)
	}
	if err := json.Unmarshal(data, &nctx); err != nil {
		return nctx, fmt.Errorf("natscli context %s: %w", path, err)
	}
	return nctx, nil
}

// wanted reports whether the command should use NATS.
func (f clientNATSFlags) wanted() bool { return f.NATS != "" || f.NATSContext != "" }

// connect opens a NATS connection from the flags; defaultURL applies when
// neither --nats nor a context names one.
func (f clientNATSFlags) connect(ctx context.Context, defaultURL string) (*nats.Conn, error) {
	nctx, err := loadNATSContext(f.NATSContext)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.ConnConfig{URL: f.NATS, Name: "engine-cli", User: f.NATSUser, Password: f.NATSPassword, CredsFile: f.NATSCreds,
		NKeySeedFile: nctx.NKey, Token: nctx.Token, TLSCAFile: nctx.CA, TLSCertFile: nctx.Cert, TLSKeyFile: nctx.Key}
	if cfg.URL == "" {
		cfg.URL = nctx.URL
	}
	if cfg.URL == "" {
		cfg.URL = defaultURL
	}
	if cfg.User == "" && cfg.CredsFile == "" {
		cfg.User, cfg.Password, cfg.CredsFile = nctx.User, nctx.Password, nctx.Creds
	}
	if cfg.User == "" && cfg.CredsFile == "" && cfg.NKeySeedFile == "" && cfg.Token == "" {
		// A local engine serve's embedded server has no anonymous user:
		// its engine user is in the data directory.
		if cr, err := jetstream.ReadCredentials(f.Data); err == nil {
			cfg.User, cfg.Password = cr.Engine.User, cr.Engine.Password
		}
	}
	nc, err := jetstream.Connect(ctx, cfg)
	if err != nil {
		haveCreds := cfg.User != "" || cfg.CredsFile != "" || cfg.NKeySeedFile != "" || cfg.Token != ""
		if why := natsFailure(cfg.URL, err, haveCreds, f.Data); why != nil {
			return nil, why
		}
		return nil, &unreachableError{what: "NATS", url: cfg.URL, err: err}
	}
	return nc, nil
}

// withScheme accepts a --server without a scheme (127.0.0.1:7420).
func withScheme(server string) string {
	if server != "" && !strings.Contains(server, "://") {
		return "http://" + server
	}
	return server
}

// unreachableError is a connection to the engine that failed: its
// message asks whether the engine runs there.
type unreachableError struct {
	what, url string
	err       error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("is `engine serve` running at %s? (%s: %v)", e.url, e.what, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// explainUnreachable rewrites a refused connection into a question
// naming the address.
func explainUnreachable(err error, server string) error {
	var ue *unreachableError
	if errors.As(err, &ue) || server == "" { // "" : not a client command
		return err
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		var ue *url.Error
		addr := server
		if errors.As(err, &ue) {
			if u, perr := url.Parse(ue.URL); perr == nil {
				addr = u.Scheme + "://" + u.Host
			}
		}
		return &unreachableError{what: "HTTP", url: addr, err: syscall.ECONNREFUSED}
	}
	if errors.Is(err, nats.ErrNoServers) {
		return &unreachableError{what: "NATS", url: server, err: err}
	}
	return err
}
