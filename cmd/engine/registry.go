package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

type registryCmd struct {
	Push   registryPushCmd   `cmd:"" help:"Validate a registry file and store it in the registry KV bucket; engines serving with --registry-kv switch to it at once."`
	Import registryImportCmd `cmd:"" help:"Add MCP servers' tools/list results (JSON) to a registry file: tools named mcp__<server>__<tool>, one namespace per server."`
	Diff   registryDiffCmd   `cmd:"" help:"Before a push: compare a registry file with the registry the engine serves: tools, presets and profiles that change, sessions whose tools prefix changes (prompt-cache misses), checkpoints that lose tools on resume. Writes nothing."`
}

type registryDiffCmd struct {
	clientFlags
	File string `arg:"" type:"existingfile" help:"Candidate registry file (JSON), the format of the embedded default (resolver/default_registry.json)."`
}

func (c *registryDiffCmd) Run(ctx context.Context) error {
	data, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	if !json.Valid(data) {
		return fmt.Errorf("registry %s is not JSON: give a registry file (the format of resolver/default_registry.json)", c.File)
	}
	diff := func(cl *client.Client, ctx context.Context, req client.RegistryDiffRequest) (wire.RegistryImpact, error) {
		imp, err := cl.RegistryDiff(ctx, req)
		if err != nil {
			return imp, fmt.Errorf("registry %s: %w", c.File, err)
		}
		return imp, nil
	}
	imp, err := request(ctx, c.clientFlags, diff, client.RegistryDiffRequest{Registry: data})
	if err != nil {
		return err
	}
	if c.JSON {
		return c.print(imp, nil)
	}
	impactSummary(os.Stdout, imp)
	return nil
}

// maxSummaryLosses bounds the checkpoint losses impactSummary names.
const maxSummaryLosses = 5

// impactSummary prints what pushing a candidate registry would change, in
// five lines.
func impactSummary(w io.Writer, imp wire.RegistryImpact) {
	d := imp.Diff
	hashes := "contract hashes change only where tools do"
	if d.AllHashesChange {
		hashes = "every contract hash changes"
	}
	fmt.Fprintf(w, "registry %s -> %s (%s)\n", d.From, d.To, hashes)
	tools := fmt.Sprintf("tools: +%d -%d ~%d", len(d.Added), len(d.Removed), len(d.Changed))
	if len(d.Added) > 0 {
		tools += "   added: " + strings.Join(d.Added, ", ")
	}
	if len(d.Removed) > 0 {
		tools += "   removed: " + strings.Join(d.Removed, ", ")
	}
	if len(d.Changed) > 0 {
		var ch []string
		for _, t := range d.Changed {
			ch = append(ch, fmt.Sprintf("%s (%s)", t.Name, strings.Join(t.Fields, ", ")))
		}
		tools += "   changed: " + strings.Join(ch, ", ")
	}
	if len(d.Embeddings) > 0 {
		tools += "   embeddings changed: " + strings.Join(d.Embeddings, ", ") + " (search only, no contract change)"
	}
	fmt.Fprintln(w, tools)
	defaults := "unchanged"
	if d.DefaultsChange {
		defaults = "changed"
	}
	fmt.Fprintf(w, "presets whose expansion changes: %s    profiles: %s    defaults: %s\n", noneList(d.Presets), noneList(d.Profiles), defaults)
	fmt.Fprintf(w, "sessions: %d examined, %d would see a different tools prefix (prompt-cache misses)\n", imp.Sessions, len(imp.PrefixChanged))
	if len(imp.ReferencesChanged) > 0 {
		fmt.Fprintf(w, "  of which %d keep the tools prefix but miss from a tool_reference their history holds (a referenced definition changes)\n", len(imp.ReferencesChanged))
	}
	line := fmt.Sprintf("checkpoints: %d of %d would lose tools on resume", len(imp.CheckpointLosses), imp.Checkpoints)
	for i, l := range imp.CheckpointLosses {
		if i == maxSummaryLosses {
			line += ", ... (--json lists them all)"
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		line += fmt.Sprintf("%s%s (%s)", sep, l.Session, strings.Join(l.Lost, ", "))
	}
	fmt.Fprintln(w, line)
}

func noneList(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

type registryImportCmd struct {
	Servers     []string          `arg:"" help:"SERVER=FILE (a tools/list result, or the JSON-RPC response holding one), or a directory of SERVER.json files (with an optional servers.json of descriptions)."`
	Base        string            `name:"base" type:"existingfile" help:"Registry file to add to (default: the embedded default registry)."`
	Out         string            `name:"out" short:"o" help:"Write the registry here (default: standard output)."`
	Version     string            `name:"version" help:"Version of the new registry (default: the base's, +mcp)."`
	Describe    map[string]string `name:"describe" help:"SERVER=TEXT: one-line description of a server (shown for its namespace and searched)."`
	Resident    bool              `name:"resident" help:"Mark the servers resident instead of deferred."`
	AutoContext int               `name:"auto-defer-context" help:"Context window in tokens for auto_defer (with --auto-defer-share)."`
	AutoShare   float64           `name:"auto-defer-share" help:"Share of the context window resident tools may take (auto_defer); with it, servers get no defer flag and the budget decides."`
	NotDefaults bool              `name:"not-defaults" help:"Keep the imported tools out of default_tools."`
}

func (c *registryImportCmd) Run() error {
	base := resolver.DefaultRegistryJSON()
	if c.Base != "" {
		b, err := os.ReadFile(c.Base)
		if err != nil {
			return err
		}
		base = b
	}
	var servers []resolver.MCPServer
	for _, arg := range c.Servers {
		got, err := readMCPArg(arg)
		if err != nil {
			return err
		}
		servers = append(servers, got...)
	}
	for i := range servers {
		if d, ok := c.Describe[servers[i].Name]; ok {
			servers[i].Description = d
		}
	}
	out, rep, err := resolver.ImportMCP(base, servers, resolver.ImportOptions{
		Version: c.Version, Resident: c.Resident, NotDefaults: c.NotDefaults,
		AutoDefer: resolver.AutoDefer{ContextWindow: c.AutoContext, MaxShare: c.AutoShare},
	})
	if err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
	fmt.Fprintf(os.Stderr, "imported %d tools from %d servers\n", rep.Tools, rep.Servers)
	if c.Out == "" {
		_, err = os.Stdout.Write(out)
		return err
	}
	return os.WriteFile(c.Out, out, 0o644)
}

// readMCPArg reads SERVER=FILE, or a directory of SERVER.json files whose
// servers.json, if present, maps server names to {"description": ...}.
func readMCPArg(arg string) ([]resolver.MCPServer, error) {
	if name, file, ok := strings.Cut(arg, "="); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return []resolver.MCPServer{{Name: name, ToolsList: b}}, nil
	}
	entries, err := os.ReadDir(arg)
	if err != nil {
		return nil, fmt.Errorf("%s: want SERVER=FILE or a directory of SERVER.json files: %w", arg, err)
	}
	var meta map[string]struct {
		Description string `json:"description"`
	}
	if b, err := os.ReadFile(filepath.Join(arg, "servers.json")); err == nil {
		if err := json.Unmarshal(b, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(arg, "servers.json"), err)
		}
	}
	var out []resolver.MCPServer
	for _, e := range entries { // ReadDir sorts by name
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || name == "servers" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(arg, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, resolver.MCPServer{Name: name, Description: meta[name].Description, ToolsList: b})
	}
	return out, nil
}

type registryPushCmd struct {
	storeFlags
	File                string `arg:"" type:"existingfile" help:"Registry file (JSON), the format of the embedded default (resolver/default_registry.json)."`
	MaxPrefixChanges    int    `name:"max-prefix-changes" default:"-1" help:"Refuse the push when more sessions than this would see a different tools prefix (prompt-cache misses); -1: no limit. The summary comes from a serving engine (registry-diff over NATS)."`
	MaxCheckpointLosses int    `name:"max-checkpoint-losses" default:"-1" help:"Refuse the push when more checkpoints than this would lose tools on resume; -1: no limit."`
	Force               bool   `name:"force" help:"Push even above --max-prefix-changes / --max-checkpoint-losses, or when no engine answers the diff."`
}

// checkImpact prints the impact summary of pushing data (the registry
// diff of a serving engine, asked over nc) and refuses a push above the
// thresholds unless --force.
func (c *registryPushCmd) checkImpact(ctx context.Context, nc *nats.Conn, data []byte) error {
	limited := c.MaxPrefixChanges >= 0 || c.MaxCheckpointLosses >= 0
	cl := client.NewNATS(nc, client.WithChannel("cli"), client.WithActor("registry-push"), client.WithSubjectPrefix(c.Prefix+".api"))
	imp, err := cl.RegistryDiff(ctx, client.RegistryDiffRequest{Registry: data})
	if err != nil {
		if limited && !c.Force {
			return fmt.Errorf("registry push: no impact summary to check the thresholds against (%w): serve an engine on this NATS, or push with --force", err)
		}
		fmt.Fprintf(os.Stderr, "note: no impact summary (no engine answered registry-diff: %v)\n", err)
		return nil
	}
	impactSummary(os.Stdout, imp)
	var over []string
	if c.MaxPrefixChanges >= 0 && len(imp.PrefixChanged) > c.MaxPrefixChanges {
		over = append(over, fmt.Sprintf("%d sessions would see a different tools prefix (--max-prefix-changes %d)", len(imp.PrefixChanged), c.MaxPrefixChanges))
	}
	if c.MaxCheckpointLosses >= 0 && len(imp.CheckpointLosses) > c.MaxCheckpointLosses {
		over = append(over, fmt.Sprintf("%d checkpoints would lose tools on resume (--max-checkpoint-losses %d)", len(imp.CheckpointLosses), c.MaxCheckpointLosses))
	}
	if len(over) > 0 && !c.Force {
		return fmt.Errorf("registry push refused: %s; raise the limit or push with --force", strings.Join(over, "; "))
	}
	return nil
}

func (c *registryPushCmd) Run(ctx context.Context, log zerolog.Logger) error {
	if c.NATS == "" {
		// Without --nats this would start a server on the data directory
		// and write the registry where no engine reads it.
		return fmt.Errorf("registry push needs --nats URL: the NATS server of the engines serving with --registry-kv (e.g. --nats nats://127.0.0.1:4222)")
	}
	data, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	reg, err := resolver.Load(data)
	if err != nil {
		return fmt.Errorf("registry %s: %w", c.File, err)
	}
	c.shared = true // the registry bucket is every partition's
	jlog, closeLog, err := c.openLog(ctx, log)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := c.checkImpact(ctx, jlog.Conn(), data); err != nil {
		return err
	}
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
