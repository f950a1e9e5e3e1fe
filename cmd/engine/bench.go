package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/toolintent/engine/bench"
)

type benchCmd struct {
	Quick    bool   `name:"quick" help:"Small sizes: proves the harness works, in under a minute (CI runs this)."`
	Runs     int    `name:"runs" help:"Runs per line; each line prints the median (default 5, quick 3)."`
	JSON     bool   `name:"json" help:"Print the report as JSON instead of a table."`
	Markdown bool   `name:"markdown" help:"Print the report as the Markdown page docs/performance.md (machine, date, table, notes) instead of a table."`
	From     string `name:"from" type:"existingfile" placeholder:"FILE" help:"Measure nothing: read a report saved with --json from FILE and print it (as a table, or with --markdown as docs/performance.md)."`
	Data     string `name:"data" type:"path" help:"Directory for the benchmark's embedded server (a fresh sub-directory, removed afterwards; default: the temp dir)."`
	Profile  string `name:"profile" type:"path" help:"Write a CPU profile of one extra run of each line into this directory."`
	// MemorySessions also measure the fold rate at 1M and 10M sessions;
	// 10M is a separate, longer run (about 3 GB of stream on disk).
	MemorySessions []int    `name:"memory-sessions" help:"Session counts of the memory step and its fold-rate lines (default 10000,100000,1000000; each size beyond 100k is held to >= 0.8 of the 100k fold rate). The 10M mode is --long."`
	ScaleSessions  int      `name:"scale-sessions" help:"Sessions of the scale-restart step (default 1000000, quick 10000): engine serve runs as a child process of this binary, holds that many sessions, and is restarted after a clean stop and after kill -9, and rebuilt with engine rebuild."`
	Long           bool     `name:"long" help:"The 10M mode: only the memory step, at 100k, 1M and 10M sessions (unless --only or --memory-sessions say otherwise); about 20 minutes on 2 cores, 4 GB of memory and 6 GB in --data."`
	Only           []string `name:"only" help:"Run only these steps (comma-separated): memory, erase-memory, append-sync, append-concurrent, session-read, cold-session-load, turn-resolve, resolver, fold-and-split, tool-search, prompt-cache, turn-cycle, atomic-batch, replay, cold-start, scale-out, restart, scale-restart."`
}

// Help is kong's long help of the subcommand.
func (c *benchCmd) Help() string {
	return "Starts one embedded NATS server and measures, in one run, each engine figure beside its raw JetStream baseline " +
		"on the same server: synchronous and concurrent appends, session reads, resolve, fold and split, projection replay, " +
		"a whole turn cycle (begin, discovery, dispatch, end, resume) in-process and over HTTP and on 10,000 MCP tools, the atomic batch publish, " +
		"cold start, memory per session, and restart and rebuild of engine serve (a child process) at a million sessions. Every line is the median of --runs runs with their spread; a target is met only when every run meets it. Rates are engine/raw, latencies raw/engine: above 1 the engine is faster. " +
		"Default sizes take a few minutes on 2 cores; progress goes to stderr on a terminal. " +
		"Steps, for --only: " + strings.Join(bench.Steps(), ", ") + "."
}

func (c *benchCmd) Run(ctx context.Context) error {
	for _, n := range c.MemorySessions {
		if n < 1 {
			return fmt.Errorf("--memory-sessions %d: give positive session counts, e.g. 100000,1000000,10000000", n)
		}
	}
	if c.From != "" {
		return c.render(c.From)
	}
	if c.ScaleSessions < 0 {
		return fmt.Errorf("--scale-sessions %d: give a positive session count, e.g. 1000000", c.ScaleSessions)
	}
	if c.Long {
		if len(c.MemorySessions) == 0 {
			c.MemorySessions = []int{100_000, 1_000_000, 10_000_000}
		}
		if len(c.Only) == 0 {
			c.Only = []string{"memory"}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("engine bench: find its own executable (the scale-restart step runs it as engine serve): %w", err)
	}
	cfg := bench.Config{Quick: c.Quick, Runs: c.Runs, DataDir: c.Data, ProfileDir: c.Profile, Only: c.Only, MemorySessions: c.MemorySessions,
		ScaleSessions: c.ScaleSessions, EngineBin: self, Out: newProgress().Writer()}
	rep, err := bench.Run(ctx, cfg)
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if eerr := enc.Encode(rep); eerr != nil {
			return eerr
		}
	} else if err == nil || len(rep.Lines) > 0 {
		c.print(rep)
	}
	return err
}

// render prints a report saved with --json.
func (c *benchCmd) render(file string) error {
	if c.JSON {
		return usage(fmt.Errorf("--from prints a saved report as a table or, with --markdown, as a page; it is JSON already"))
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("--from %s: not a report of engine bench --json: %w", file, err)
	}
	if len(rep.Lines) == 0 {
		return fmt.Errorf("--from %s: the report has no lines: save one with engine bench --json > %s", file, file)
	}
	c.print(rep)
	return nil
}

// print writes rep as a table or, with --markdown, as the performance page.
func (c *benchCmd) print(rep bench.Report) {
	if c.Markdown {
		fmt.Print(rep.Markdown())
		return
	}
	fmt.Print(rep.Table())
}
