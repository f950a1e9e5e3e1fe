// Command engine is the session tool-configuration engine: an
// event-sourced store of per-session tool intent on NATS JetStream, with
// live resolution, deferral, checkpoints and audit replay.
//
// Run `engine serve` for the service (an embedded NATS server by default),
// and the other subcommands to talk to it. `engine --help` lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/rs/zerolog"
	"github.com/willabides/kongplete"
)

// cli is the command line. Each subcommand is a struct with a Run method.
type cli struct {
	LogLevel string `name:"log-level" default:"warn" enum:"trace,debug,info,warn,error,disabled" env:"ENGINE_LOG_LEVEL" help:"Log level of the structured (JSON) logs on stderr: ${enum}."`

	Serve       serveCmd                     `cmd:"" help:"Run the engine: embedded NATS JetStream server (or --nats URL), projection, NATS micro service and HTTP API."`
	Emit        emitCmd                      `cmd:"" help:"Append an intent change to a session (enable, disable-all, follow, web-search, preset, disable, enable-tool, pick, unpick, or raw JSON)."`
	Intent      intentCmd                    `cmd:"" help:"Show a session's stored intent, loaded deferred tools and last checkpoint."`
	Resolve     resolveCmd                   `cmd:"" help:"Resolve a session's tools for a request: provider array, deferred catalog, contract hash, budget."`
	Turn        turnCmd                      `cmd:"" help:"Drive a session's turn: begin (freeze tools), search (tool_search), dispatch, end (safe point)."`
	History     historyCmd                   `cmd:"" help:"Show a session's event timeline with the intent and tool-set changes at each event (--until for time travel)."`
	Explain     explainCmd                   `cmd:"" help:"Say why a tool is or is not in a session's tool set, naming the rule and the event responsible."`
	Checkpoint  checkpointCmd                `cmd:"" help:"Record a checkpoint (safe point) of a session's open turn."`
	Resume      resumeCmd                    `cmd:"" help:"Resume a session after a crash: verify the checkpoint's contract hash, restore loaded deferred tools or say why not."`
	Sessions    sessionsCmd                  `cmd:"" help:"List sessions that have a view."`
	Delete      deleteCmd                    `cmd:"" help:"Delete a session for good: writes and every read but history answer 410 deleted, the id starts no new session."`
	Compact     compactCmd                   `cmd:"" help:"Compact a session: one SessionCompacted that folds to the same state replaces its events, which are purged (erase channel only), leaving an audit record."`
	Erase       eraseCmd                     `cmd:"" help:"Erase a session: delete it and purge its events (erase channel only), leaving an audit record without personal data."`
	Actor       actorCmd                     `cmd:"" help:"Pseudonymous actors: print a user's hash token (token), or destroy a user's key in encrypt mode (forget)."`
	Registry    registryCmd                  `cmd:"" help:"Manage the registry served from KV (serve --registry-kv)."`
	Import      importCmd                    `cmd:"" help:"Import legacy sessions that stored a materialized tool list as the intent that reproduces them (dry run by default; --apply writes)."`
	Rebuild     rebuildCmd                   `cmd:"" help:"Rebuild every session view from the log (offline), with progress on a terminal."`
	Stream      streamCmd                    `cmd:"" help:"Check and repair the event stream (admin)."`
	Migrate     migrateCmd                   `cmd:"" help:"Migrate a store of one event stream to partitions (--nats, every engine stopped): its sessions stay, new ones go to their partition."`
	Bench       benchCmd                     `cmd:"" help:"Measure the engine against raw JetStream on one embedded server and print a table of ratios."`
	Budget      budgetCmd                    `cmd:"" help:"Print the resident-token table of a registry with and without deferral, measured with a real BPE tokenizer."`
	Events      eventsCmd                    `cmd:"" help:"Print a session's events from the stream, decoded, one JSON object per line (--follow: live)."`
	Tail        tailCmd                      `cmd:"" help:"Print every session's new events from the stream as they are appended, decoded, one JSON object per line (--last N: the last N events first)."`
	Version     versionCmd                   `cmd:"" help:"Print the engine's version: module version, commit, Go, nats-server and API versions."`
	Completion  kongplete.InstallCompletions `cmd:"" help:"Print the shell completion setup for your login shell (bash, zsh or fish): add eval \"$(engine completion)\" to its rc file."`
	Healthcheck healthcheckCmd               `cmd:"" help:"Exit 0 when the engine at --server is ready (/readyz; --live: /healthz), 1 otherwise (container healthchecks)."`
}

// timeFormat is RFC 3339 with milliseconds, the time of every log line.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		// Top level only: registry import has a --version flag of its own.
		fmt.Println(versionLine())
		return
	}
	var c cli
	parser, err := kong.New(&c,
		kong.Name("engine"),
		kong.Description("Event-sourced session tool-configuration engine on NATS JetStream.\n\nA session stores only its tool intent; tools are expanded from the live registry on every request, deterministically, split into resident schemas and a deferred catalog, checkpointed and resumed by contract hash.\n\nengine --version prints the version; engine version the details."),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Vars{"override_help": overrideHelp},
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "engine: %v\n", err)
		os.Exit(1)
	}
	// Shell completion: the shell runs the binary with
	// COMP_LINE set; Complete answers and exits, and does nothing otherwise.
	kongplete.Complete(parser)
	kctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		// A usage error: one short line and where the help is, exit 2.
		printError(os.Stderr, err, jsonWanted(nil, os.Args[1:]), helpHint(err))
		os.Exit(2)
	}
	level, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "engine: --log-level %q: %v\n", c.LogLevel, err)
		os.Exit(2)
	}
	zerolog.TimeFieldFormat = timeFormat
	logger := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	if err := kctx.Run(logger); err != nil {
		stop()
		err = explainUnreachable(err, serverOf(kctx))
		hint := ""
		if exitCode(err) == 2 {
			hint = helpHint(err)
			if cmd := kctx.Selected(); cmd != nil {
				hint = "Run 'engine " + cmd.Path() + " --help' for usage."
			}
		}
		printError(os.Stderr, err, jsonWanted(kctx, os.Args[1:]), hint)
		os.Exit(exitCode(err))
	}
}

// helpHint names the --help of the command a usage error is about.
func helpHint(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		if cmd := pe.Context.Selected(); cmd != nil {
			return "Run 'engine " + cmd.Path() + " --help' for usage."
		}
	}
	return "Run 'engine --help' for usage."
}

// serverOf is the address a client command talks to ("" for others).
func serverOf(kctx *kong.Context) string {
	for _, p := range kctx.Path {
		if p.Command == nil {
			continue
		}
		if a, ok := p.Command.Target.Addr().Interface().(interface{ address() string }); ok {
			return a.address()
		}
	}
	return ""
}
