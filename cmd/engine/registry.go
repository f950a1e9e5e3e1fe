package main

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/resolver"
)

type registryCmd struct {
	Push registryPushCmd `cmd:"" help:"Validate a registry file and store it in the registry KV bucket; engines serving with --registry-kv switch to it at once."`
}

type registryPushCmd struct {
	storeFlags
	File string `arg:"" type:"existingfile" help:"Registry file (JSON), the format of the embedded default (resolver/default_registry.json)."`
}

func (c *registryPushCmd) Run(ctx context.Context, log zerolog.Logger) error {
	data, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	reg, err := resolver.Load(data)
	if err != nil {
		return fmt.Errorf("registry %s: %w", c.File, err)
	}
	jlog, _, closeLog, err := c.openLog(ctx, log, "127.0.0.1:0", "interval")
	if err != nil {
		return err
	}
	defer closeLog()
	store, err := jlog.OpenRegistryStore(ctx)
	if err != nil {
		return err
	}
	canonical, err := reg.MarshalJSON()
	if err != nil {
		return err
	}
	rev, err := store.Put(ctx, canonical)
	if err != nil {
		return err
	}
	fmt.Printf("stored registry %s (%d tools) as revision %d\n", reg.Version(), reg.Len(), rev)
	return nil
}
