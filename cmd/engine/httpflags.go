package main

import (
	"fmt"
	"net"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/internal/tokens"
)

// apiConnFlags give the NATS micro service its own login:
// with deploy/nats-server.conf's engine-api user, whose publish rights are
// only the users' reply inboxes, the server itself refuses a reply to any
// other subject (the log, a KV bucket) that a request names.
type apiConnFlags struct {
	NATSAPIUser     string `name:"nats-api-user" env:"ENGINE_NATS_API_USER" help:"NATS user of the engine's API (micro service) connection, e.g. engine-api of deploy/nats-server.conf; default: the engine's own connection."`
	NATSAPIPassword string `name:"nats-api-password" env:"ENGINE_NATS_API_PASSWORD" help:"Password for --nats-api-user."`
	// The privileged connection of erases.
	NATSEraseUser     string `name:"nats-erase-user" env:"ENGINE_NATS_ERASE_USER" help:"NATS user of the connection that purges erased sessions, allowed $JS.API.STREAM.PURGE.<PREFIX>_EVENTS (deploy/accounts.conf: eraser); never a channel's user. Default: the embedded server's admin, or the engine's own connection on --nats."`
	NATSErasePassword string `name:"nats-erase-password" env:"ENGINE_NATS_ERASE_PASSWORD" help:"Password for --nats-erase-user."`
}

// httpFlags configure the HTTP gateway's trust boundary.
type httpFlags struct {
	HTTPTokens   string        `name:"http-tokens" type:"existingfile" env:"ENGINE_HTTP_TOKENS" help:"Tokens file (JSON array of {\"token\",\"channel\",\"actor\",\"read_only\"}): every HTTP API request then needs Authorization: Bearer <token> and writes as the token's channel. Required for a non-loopback --http."`
	HTTPChannels []string      `name:"http-channel" env:"ENGINE_HTTP_CHANNELS" help:"Engine-Channel values the HTTP API trusts without --http-tokens, each with its own in-flight budget and metrics label (besides the default channel http and the CLI's cli); every other channel named by the header shares one budget and the label \"other\"."`
	HTTPHosts    []string      `name:"http-host" env:"ENGINE_HTTP_HOSTS" help:"Host names (or name:port) the HTTP server answers to, besides localhost, 127.0.0.1 and [::1]; other Host headers are refused (DNS rebinding)."`
	HTTPOrigins  []string      `name:"http-origin" env:"ENGINE_HTTP_ORIGIN" help:"Origins (scheme://host[:port]) whose pages may send cross-origin writes; by default only the engine's own pages may."`
	HTTPMaxConn  int           `name:"http-max-conns" env:"ENGINE_HTTP_MAX_CONNS" default:"512" help:"Most HTTP connections open at once; more wait in the listen queue."`
	HTTPRead     time.Duration `name:"http-read-timeout" env:"ENGINE_HTTP_READ_TIMEOUT" default:"15s" help:"Time a client has to send a whole request (headers and body); slower ones are cut off."`
}

// apiConfig completes an API configuration with the HTTP trust settings
// and refuses a non-loopback listener without tokens.
func (f httpFlags) apiConfig(cfg api.Config, addr string) (api.Config, error) {
	if f.HTTPTokens != "" {
		toks, err := tokens.Load(f.HTTPTokens)
		if err != nil {
			return cfg, err
		}
		cfg.Tokens = toks
	}
	if addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return cfg, fmt.Errorf("--http %q: %w (want host:port, e.g. 127.0.0.1:7420)", addr, err)
		}
		if !loopbackHost(host) && cfg.Tokens == nil {
			return cfg, fmt.Errorf("--http %s is not a loopback address and the HTTP API has no authentication: give --http-tokens FILE (bearer tokens mapped to channels), or listen on 127.0.0.1", addr)
		}
		if host != "" && !net.ParseIP(host).IsUnspecified() && !loopbackHost(host) {
			f.HTTPHosts = append(f.HTTPHosts, host)
		}
	}
	if len(f.HTTPHosts) > 0 {
		cfg.Hosts = append([]string{"localhost", "127.0.0.1", "[::1]"}, f.HTTPHosts...)
	}
	cfg.Origins = f.HTTPOrigins
	// cli is the channel the engine's own CLI sends (its --channel
	// default): known, like the default channel http.
	cfg.HTTPChannels = append([]string{"cli"}, f.HTTPChannels...)
	return cfg, nil
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
