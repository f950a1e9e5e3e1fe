package server

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
)

// eraserConn opens the privileged connection of erases, never a
// channel's: the embedded server's admin (its generated users), or the
// user --nats-erase-user names on an external server; nil (the engine's
// own connection) when neither is there. The returned func closes it.
func (c *store) eraserConn(ctx context.Context, cfg Config, url string) (*nats.Conn, func(), error) {
	switch {
	case cfg.NATSEraseUser != "":
		enc, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: url, Name: "engine-eraser", User: cfg.NATSEraseUser, Password: cfg.NATSErasePassword,
			TLSCAFile: c.TLSCA, TLSCertFile: c.TLSCert, TLSKeyFile: c.TLSKey})
		if err != nil {
			return nil, nil, fmt.Errorf("erase connection as --nats-erase-user %s: %w", cfg.NATSEraseUser, err)
		}
		return enc, func() { _ = enc.Drain() }, nil
	case c.embedded != nil && c.ServerConfig == "":
		cr, err := jetstream.ReadCredentials(c.Data)
		if err != nil {
			return nil, nil, err
		}
		enc, err := nats.Connect(c.embedded.ClientURL(), nats.InProcessServer(c.embedded.Server()), nats.Name("engine-eraser"),
			nats.UserInfo(cr.Admin.User, cr.Admin.Password), nats.MaxReconnects(-1))
		if err != nil {
			return nil, nil, fmt.Errorf("erase connection as the embedded server's admin: %w", err)
		}
		return enc, func() { _ = enc.Drain() }, nil
	}
	return nil, func() {}, nil
}

// startEraser gives eng its eraser: each event stream's audit records
// and purges on the privileged connection, and on an embedded store the
// watermark lowered and the erased range recorded as accepted before
// each purge, so an erase never reads as data loss. It waits for NATS
// while opening them fails transiently (waitForNATS); without it (a
// stream or the connection cannot be opened for another reason, such as
// permissions) erases answer that they are unavailable; serving goes on.
func (c *store) startEraser(ctx context.Context, cfg Config, url string, parts []*part, eng *service.Engine, log zerolog.Logger) func() {
	var before func(jetstream.EraseReport) error
	var after func(jetstream.EraseReport, error)
	if c.embedded != nil {
		// The store check reads the purged range from the audit
		// stream's record, written before the purge: only the watermark
		// is lowered here.
		before = func(rep jetstream.EraseReport) error { return c.acked.beforePurge(rep.Purged) }
		after = func(jetstream.EraseReport, error) { c.acked.afterPurge() }
	}
	var x service.Eraser
	var closeEnc func()
	// The erasers' requests go on the log's connection and on enc.
	err := waitForNATSOn(ctx, log, parts[0].log.Conn(), "open the erase path", func(actx context.Context) error {
		enc, closeConn, err := c.eraserConn(actx, cfg, url)
		if err != nil {
			return err
		}
		open := func(actx context.Context) error {
			x, err = newErasers(actx, parts, enc, before, after)
			return err
		}
		if enc != nil {
			err = jetstream.WatchRefusal(actx, enc, "", open)
		} else {
			err = open(actx)
		}
		if err != nil {
			closeConn()
			return err
		}
		closeEnc = closeConn
		return nil
	})
	if err != nil {
		log.Warn().Err(err).Msg("no erase: sessions can be deleted, not erased")
		return func() {}
	}
	eng.SetEraser(x)
	return closeEnc
}

// startEraseFinisher finishes the erases a crash interrupted
// (service.Engine.FinishErases), on the engine that runs the projection
// (runner):
// shortly after start, then every --erase-takeover (at most every
// minute). The returned channel closes when the loop has stopped (after
// ctx ends).
func startEraseFinisher(ctx context.Context, cfg Config, eng *service.Engine, runner func() bool, log zerolog.Logger) <-chan struct{} {
	if cfg.NoProjection || !eng.CanErase() {
		return paced(ctx, 0, nil)
	}
	interval := min(max(cfg.EraseTakeover, time.Second), time.Minute)
	if cfg.EraseTakeover <= 0 {
		interval = service.DefaultEraseTakeover
	}
	return paced(ctx, min(interval, 2*time.Second), func() time.Duration {
		if !runner() {
			return interval
		}
		rep, err := eng.FinishErases(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("look for erases a crash interrupted")
		case rep.Finished+rep.Cancelled+rep.Errors > 0:
			log.Info().Int("finished", rep.Finished).Int("cancelled", rep.Cancelled).Int("errors", rep.Errors).Int("open", rep.Open).
				Msg("erases a crash interrupted: finished")
		}
		return interval
	})
}
