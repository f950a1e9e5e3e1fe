package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolintent/engine/deferral"
)

type budgetCmd struct {
	Registry string   `name:"registry" type:"existingfile" help:"Registry file to measure (default: the embedded default registry)."`
	Load     []string `name:"load" help:"Tools the simulated discoveries load, one per discovery (default: the first, middle and last name of the catalog)."`
	JSON     bool     `name:"json" help:"Print JSON instead of a table."`
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
	rows, loaded, err := deferral.ModeTable(reg, c.Load)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			deferral.BudgetTable
			Modes  []deferral.ModeRow `json:"modes"`
			Loaded []string           `json:"discoveries"`
		}{t, rows, loaded})
	}
	fmt.Print(t.String())
	fmt.Println()
	fmt.Print(deferral.ModeTableString(rows, loaded))
	return nil
}
