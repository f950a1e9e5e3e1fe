package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

type budgetCmd struct {
	Registry string `name:"registry" type:"existingfile" help:"Registry file to measure (default: the embedded default registry)."`
	JSON     bool   `name:"json" help:"Print JSON instead of a table."`
}

func (c *budgetCmd) Run() error {
	reg := resolver.Default()
	if c.Registry != "" {
		r, err := resolver.LoadFile(c.Registry)
		if err != nil {
			return fmt.Errorf("load registry: %w", err)
		}
		reg = r
	}
	t, err := deferral.Table(reg)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	fmt.Print(t.String())
	return nil
}
