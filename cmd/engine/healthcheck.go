package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// healthcheckCmd asks a running engine whether it is ready (/readyz) or
// alive (/healthz): exit 0 when it is, 1 when not. It needs no shell or
// curl, so a container healthcheck can run the engine binary itself.
// With --wait it asks again until the engine is ready, so a script can
// start serve in the background and wait for it.
type healthcheckCmd struct {
	Server  string        `name:"server" default:"http://127.0.0.1:7420" env:"ENGINE_SERVER,ENGINE_HTTP" help:"HTTP address of the engine (ENGINE_SERVER, else serve's own ENGINE_HTTP); the scheme may be left out."`
	Live    bool          `name:"live" help:"Check /healthz (the NATS connection) instead of /readyz (also the projection's catch-up)."`
	Timeout time.Duration `name:"timeout" default:"5s" help:"Give up on one check after this long."`
	Wait    time.Duration `name:"wait" placeholder:"DURATION" help:"Ask again every 200 ms until the engine is ready (or alive), for at most this long (e.g. 30s): for scripts that start engine serve in the background."`
}

// waitStep is how often --wait asks again.
const waitStep = 200 * time.Millisecond

func (c *healthcheckCmd) Run(ctx context.Context) error {
	if c.Wait <= 0 {
		return c.check(ctx)
	}
	deadline := time.Now().Add(c.Wait)
	for {
		err := c.check(ctx)
		if err == nil || time.Now().Add(waitStep).After(deadline) {
			if err != nil {
				return fmt.Errorf("not ready after --wait %s: %w", c.Wait, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitStep):
		}
	}
}

// check asks the engine once.
func (c *healthcheckCmd) check(ctx context.Context) error {
	path := "/readyz"
	if c.Live {
		path = "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	url := strings.TrimSuffix(withScheme(c.Server), "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return explainUnreachable(err, withScheme(c.Server))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Print(string(body))
	return nil
}
