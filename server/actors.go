package server

// Pseudonymous actors: serve --actor-mode plain|hash|encrypt with
// --actor-key-file seals the actor of every event the engine writes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
)

// ActorConfig is how the engine stores actors. The zero value
// stores them as given (plain).
type ActorConfig struct {
	// Mode is plain (default), hash or encrypt (serve --actor-mode).
	Mode string
	// KeyFile is the operator key file (serve --actor-key-file): at least
	// 32 bytes; hash and encrypt need it. In plain mode it is optional and
	// lets the engine reveal actors encrypted earlier.
	KeyFile string
}

// Validate reports every problem of the actor settings, naming the flag
// and the fix; it reads the key file.
func (c ActorConfig) Validate() error {
	mode, err := actor.ParseMode(c.Mode)
	if err != nil {
		return fmt.Errorf("--actor-mode %q: want plain, hash or encrypt: %w", c.Mode, err)
	}
	if c.KeyFile == "" {
		if mode != actor.Plain {
			return fmt.Errorf("--actor-mode %s needs --actor-key-file PATH, a file of at least %d secret bytes kept outside the data directory (make one with `openssl rand -hex 32 > actor.key`): %w", mode, actor.MinKeyLen, actor.ErrNoKeyFile)
		}
		return nil
	}
	if _, err := actor.ReadKeyFile(c.KeyFile); err != nil {
		return fmt.Errorf("--actor-key-file: %w", err)
	}
	return nil
}

// startActors gives eng its actor sealer: nothing in plain mode without a
// key file; otherwise the operator key, and (encrypt mode, or any mode
// with a key file, to reveal earlier encrypted actors) the actor key
// bucket on the engine's connection.
func startActors(ctx context.Context, cfg ActorConfig, jlog *jetstream.Log, eng *service.Engine, log zerolog.Logger) error {
	mode, err := actor.ParseMode(cfg.Mode)
	if err != nil {
		return fmt.Errorf("--actor-mode: %w", err)
	}
	if cfg.KeyFile == "" {
		if mode != actor.Plain {
			return fmt.Errorf("--actor-mode %s: %w", mode, actor.ErrNoKeyFile)
		}
		return nil
	}
	key, err := actor.ReadKeyFile(cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("--actor-key-file: %w", err)
	}
	var keys *jetstream.ActorKeys
	err = waitForNATSOn(ctx, log, jlog.Conn(), "open the actor key bucket", func(actx context.Context) error {
		keys, err = jlog.OpenActorKeys(actx)
		return err
	})
	if err != nil {
		if mode == actor.Encrypt {
			return fmt.Errorf("--actor-mode encrypt: %w", err)
		}
		log.Warn().Err(err).Msg("actor key bucket unavailable: encrypted actors of earlier events are shown as stored")
	}
	acfg := actor.Config{Mode: mode, Key: key}
	if keys != nil {
		acfg.Keys = keys
	}
	s, err := actor.New(acfg)
	if err != nil {
		return errors.Join(fmt.Errorf("--actor-mode %s", mode), err)
	}
	if keys != nil {
		// A wrong key file would otherwise make new keys for
		// every person and show their earlier actors as ciphertext.
		err := waitForNATSOn(ctx, log, jlog.Conn(), "check the actor key file", s.Check)
		switch {
		case errors.Is(err, actor.ErrWrongKey):
			return fmt.Errorf("--actor-key-file %s does not open the actor keys in the key bucket (they were made with another key file): start with the key file they were made with: %w", cfg.KeyFile, err)
		case err != nil && mode == actor.Encrypt:
			return fmt.Errorf("--actor-mode encrypt: check --actor-key-file %s against the actor key bucket: %w", cfg.KeyFile, err)
		case err != nil:
			log.Warn().Err(err).Msg("actor key check failed: encrypted actors of earlier events may be shown as stored")
		}
	}
	eng.SetActorSealer(s)
	log.Info().Str("actor_mode", string(mode)).Msg("actors sealed")
	return nil
}
