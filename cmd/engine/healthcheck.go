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
type healthcheckCmd struct {
	Server  string        `name:"server" default:"http://127.0.0.1:7420" env:"ENGINE_SERVER" help:"HTTP address of the engine; the scheme may be left out."`
	Live    bool          `name:"live" help:"Check /healthz (the NATS connection) instead of /readyz (also the projection's catch-up)."`
	Timeout time.Duration `name:"timeout" default:"5s" help:"Give up after this long."`
}

func (c *healthcheckCmd) Run(ctx context.Context) error {
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
