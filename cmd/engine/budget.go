package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolintent/engine/deferral"
)

type budgetCmd struct {
	Registry string `name:"registry" type:"existingfile" help:"Registry file to measure (default: the embedded default registry)."`
	JSON     bool   `name:"json" help:"Print JSON instead of a table."`
}

func (c *budgetCmd) Run() error {
	reg, err := loadRegistry(c.Registry)
	if err != nil {
		return err
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
