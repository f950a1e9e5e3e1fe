package main

// Pseudonymous actors: the serve flags, engine actor token and
// engine actor forget.

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/server"
)

// actorFlags are serve's actor flags.
type actorFlags struct {
	ActorMode    string `name:"actor-mode" env:"ENGINE_ACTOR_MODE" default:"plain" enum:"plain,hash,encrypt" help:"How events store their actor: 'plain' (as written), 'hash' (a keyed hash h1:..., the same for one person; engine actor token USER computes it to search an audit) or 'encrypt' (e1:..., under a per-person key in the <PREFIX>_ACTORKEYS bucket; engine actor forget USER destroys it, and every event of USER reads back as (erased)). Engine-internal actors (anonymous, engine:retention) stay plain. hash and encrypt need --actor-key-file."`
	ActorKeyFile string `name:"actor-key-file" env:"ENGINE_ACTOR_KEY_FILE" type:"path" placeholder:"PATH" help:"Operator key of --actor-mode hash and encrypt: a file of at least 32 secret bytes (openssl rand -hex 32 > actor.key), kept outside the data directory and backed up: without it no token can be computed and no encrypted actor read. With plain mode it lets the engine read actors encrypted earlier."`
}

// config maps the flags to the server's settings.
func (f actorFlags) config() server.ActorConfig {
	return server.ActorConfig{Mode: f.ActorMode, KeyFile: f.ActorKeyFile}
}

// actorKeyFlag is the operator key of the actor subcommands.
type actorKeyFlag struct {
	ActorKeyFile string `name:"actor-key-file" env:"ENGINE_ACTOR_KEY_FILE" required:"" type:"path" placeholder:"PATH" help:"The operator key file engine serve uses (--actor-key-file)."`
}

func (f actorKeyFlag) key() ([]byte, error) {
	k, err := actor.ReadKeyFile(f.ActorKeyFile)
	if err != nil {
		return nil, usage(fmt.Errorf("--actor-key-file: %w", err))
	}
	return k, nil
}

// actorCmd is `engine actor`.
type actorCmd struct {
	Token  actorTokenCmd  `cmd:"" help:"Print the stored token of USER in --actor-mode hash (h1:...), to find USER's events in an audit."`
	Forget actorForgetCmd `cmd:"" help:"Forget USER in --actor-mode encrypt: destroy USER's key, so every event USER wrote reads back as (erased); the log is not rewritten."`
}

// actorTokenCmd is `engine actor token USER`.
type actorTokenCmd struct {
	actorKeyFlag
	User string `arg:"" help:"The actor (user id) as the channel sends it."`
}

// Help is the long help of engine actor token.
func (c *actorTokenCmd) Help() string {
	return "Prints the token that engine serve --actor-mode hash stores as the actor of USER's events: HMAC-SHA256 " +
		"of USER under the operator key, h1: and 32 hex digits. The same key and USER always give the same token, so " +
		"an operator who knows a user id finds that user's events (engine events, engine history, the stream) by " +
		"searching for it; nobody can compute a user id from a token. Works offline: it needs only the key file."
}

func (c *actorTokenCmd) Run() error {
	key, err := c.key()
	if err != nil {
		return err
	}
	s, err := actor.New(actor.Config{Mode: actor.Hash, Key: key})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, s.Token(c.User))
	return nil
}

// actorForgetCmd is `engine actor forget USER`.
type actorForgetCmd struct {
	storeFlags
	actorKeyFlag
	User string `arg:"" help:"The actor (user id) to forget."`
}

// Help is the long help of engine actor forget.
func (c *actorForgetCmd) Help() string {
	return "Destroys USER's data key in the <PREFIX>_ACTORKEYS bucket (delete and purge: no revision stays) through " +
		"the admin connection, as engine erase purges: with the embedded server's data directory (engine stopped), or " +
		"--nats URL with no user given, it connects as the admin of <data>/nats-users.json; otherwise give a user " +
		"allowed to purge the bucket (--nats-user). Afterwards every event USER wrote in --actor-mode encrypt, on every " +
		"engine, reads back as (erased); the events stay in the log, byte for byte. It cannot undo: a backup of the " +
		"bucket taken before still holds the key, and actors stored plain or hashed before encrypt mode are not touched " +
		"(erase those sessions). Engines that sealed with the key in the last 10 s may write one more event under it, " +
		"which reads back erased too. A later write by USER creates a new key."
}

func (c *actorForgetCmd) Run(ctx context.Context, log zerolog.Logger) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	c.shared = true // the actor-keys bucket is every partition's
	jlog, closeLog, err := c.openExisting(ctx, log, true)
	if err != nil {
		return err
	}
	defer closeLog()
	keys, err := jlog.OpenActorKeys(ctx)
	if err != nil {
		return err
	}
	s, err := actor.New(actor.Config{Mode: actor.Encrypt, Key: key, Keys: keys})
	if err != nil {
		return err
	}
	id, err := s.Forget(ctx, c.User)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "forgot\tkey %s destroyed in %s: every event this actor wrote in encrypt mode reads back as %s\n", id, keys.Bucket(), "(erased)")
	return nil
}
