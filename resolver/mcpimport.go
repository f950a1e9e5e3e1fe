package resolver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolintent/engine/internal/toolname"
)

// ErrInvalidImport reports MCP input that cannot be imported: not a
// tools/list result, a bad server name, names that collide. Match it with
// errors.Is.
var ErrInvalidImport = errors.New("invalid MCP import")

// MCPServer is one MCP server to import: its name (the namespace of its
// tools) and its tools/list result.
type MCPServer struct {
	// Name is the server name: letters, digits, '_' and '-', no "__"; its
	// tools are named mcp__<Name>__<tool>.
	Name string
	// Description says in one line what the server does (the namespace
	// description); "" leaves it empty.
	Description string
	// ToolsList is the JSON of a tools/list result ({"tools":[...]}), or of
	// the JSON-RPC response carrying it ({"jsonrpc":"2.0","result":{...}}).
	ToolsList []byte
}

// ImportOptions say how imported tools are deferred and offered.
type ImportOptions struct {
	// Version is the new registry version; "" appends "+mcp" to the base's.
	Version string
	// Resident marks the imported servers resident ("defer": false); by
	// default every imported server is deferred ("defer": true).
	Resident bool
	// AutoDefer, when set, is written as the registry's auto_defer and the
	// servers get no defer flag, so that the budget decides (tools in
	// default_tools start resident and the largest are deferred while
	// they exceed it).
	AutoDefer AutoDefer
	// NotDefaults keeps the imported tools out of default_tools (they are
	// then only reached by presets, profiles or picked lists).
	NotDefaults bool
}

// ImportReport says what an import did to each tool it did not take as is.
type ImportReport struct {
	// Servers and Tools count what was imported.
	Servers int `json:"servers"`
	Tools   int `json:"tools"`
	// Notes are the per-tool changes, in input order: names rewritten to
	// the provider rule, names shortened, descriptions filled in, schemas
	// given a type.
	Notes []string `json:"notes,omitempty"`
}

type mcpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ImportMCP adds MCP servers' tools to a registry file and
// returns the new file: each tool becomes mcp__<server>__<tool> with its
// description and input schema, permission "mcp:<server>"; each server a
// namespace (deferred unless opt.Resident or opt.AutoDefer); default_tools
// gain the pattern
// mcp__<server>__* unless opt.NotDefaults. Names outside the provider rule
// (dots, slashes, other characters) are rewritten with '_', names longer
// than 64 bytes are shortened with a hash suffix, and each such change is
// in the report. The result is checked by Load before it is returned; the
// output's keys are sorted, so equal inputs give equal bytes.
func ImportMCP(base []byte, servers []MCPServer, opt ImportOptions) ([]byte, ImportReport, error) {
	var rep ImportReport
	baseReg, err := Load(base)
	if err != nil {
		return nil, rep, fmt.Errorf("import MCP: base registry: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, rep, fmt.Errorf("import MCP: base registry: %w", err)
	}
	var tools []json.RawMessage
	var defaults []string
	namespaces := map[string]json.RawMessage{}
	for _, part := range []struct {
		key string
		dst any
	}{{"tools", &tools}, {"default_tools", &defaults}, {"namespaces", &namespaces}} {
		if raw, ok := doc[part.key]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, part.dst); err != nil {
				return nil, rep, fmt.Errorf("import MCP: base registry %s: %w", part.key, err)
			}
		}
	}
	taken := map[string]string{} // registry name → source, for collisions
	for _, t := range baseReg.Tools() {
		taken[t.Name] = "the base registry"
	}
	seenServer := map[string]bool{}
	for _, s := range servers {
		if !toolname.Valid(s.Name) || strings.Contains(s.Name, "__") {
			return nil, rep, fmt.Errorf("%w: server name %q must match %s without \"__\"; rename it", ErrInvalidImport, s.Name, toolname.Pattern)
		}
		if seenServer[s.Name] {
			return nil, rep, fmt.Errorf("%w: server %q given twice", ErrInvalidImport, s.Name)
		}
		seenServer[s.Name] = true
		list, err := parseToolsList(s.ToolsList)
		if err != nil {
			return nil, rep, fmt.Errorf("%w: server %q: %w", ErrInvalidImport, s.Name, err)
		}
		perm := "mcp:" + strings.ToLower(s.Name)
		for i, mt := range list {
			name, notes := importName(s.Name, mt.Name)
			rep.Notes = append(rep.Notes, notes...)
			if prev, dup := taken[name]; dup {
				return nil, rep, fmt.Errorf("%w: server %q tool %d %q becomes %q, which %s already has; rename one", ErrInvalidImport, s.Name, i, mt.Name, name, prev)
			}
			taken[name] = fmt.Sprintf("server %q", s.Name)
			desc := strings.TrimSpace(mt.Description)
			if desc == "" {
				desc = fmt.Sprintf("Tool %s of the MCP server %s.", mt.Name, s.Name)
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: no description; wrote %q", name, desc))
			}
			schema := bytes.TrimSpace(mt.InputSchema)
			if len(schema) == 0 || string(schema) == "null" {
				schema = []byte(`{"type":"object"}`)
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: no inputSchema; wrote {\"type\":\"object\"}", name))
			}
			entry, err := json.Marshal(struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Permission  string          `json:"permission"`
			}{name, desc, schema, perm})
			if err != nil {
				return nil, rep, fmt.Errorf("%w: server %q tool %q: %w", ErrInvalidImport, s.Name, mt.Name, err)
			}
			tools = append(tools, entry)
			rep.Tools++
		}
		if len(list) == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("server %s: no tools", s.Name))
			continue
		}
		ns := map[string]any{"description": s.Description}
		if opt.AutoDefer.Budget() <= 0 {
			ns["defer"] = !opt.Resident
		}
		b, _ := json.Marshal(ns)
		namespaces[s.Name] = b
		if !opt.NotDefaults {
			defaults = append(defaults, MCPPrefix+s.Name+"__*")
		}
		rep.Servers++
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		doc[key] = b
		return nil
	}
	version := opt.Version
	if version == "" {
		version = baseReg.Version() + "+mcp"
	}
	if err := errors.Join(set("version", version), set("tools", tools), set("default_tools", defaults), set("namespaces", namespaces)); err != nil {
		return nil, rep, fmt.Errorf("import MCP: %w", err)
	}
	if opt.AutoDefer.Budget() > 0 {
		if err := set("auto_defer", opt.AutoDefer); err != nil {
			return nil, rep, fmt.Errorf("import MCP: %w", err)
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		return nil, rep, fmt.Errorf("import MCP: %w", err)
	}
	if _, err := Load(out.Bytes()); err != nil {
		return nil, rep, fmt.Errorf("import MCP: the imported registry does not load: %w", err)
	}
	return out.Bytes(), rep, nil
}

// parseToolsList reads a tools/list result or a JSON-RPC response holding
// one.
func parseToolsList(b []byte) ([]mcpTool, error) {
	var v struct {
		Tools  *[]mcpTool `json:"tools"`
		Result *struct {
			Tools *[]mcpTool `json:"tools"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not a tools/list result: %w", err)
	}
	switch {
	case v.Tools != nil:
		return *v.Tools, nil
	case v.Result != nil && v.Result.Tools != nil:
		return *v.Result.Tools, nil
	case len(v.Error) > 0:
		return nil, fmt.Errorf("the JSON-RPC response is an error: %s", v.Error)
	}
	return nil, errors.New(`not a tools/list result: want {"tools":[...]} or {"result":{"tools":[...]}}`)
}

// importName is the registry name of an MCP tool: mcp__<server>__<tool>,
// characters outside the provider rule replaced by '_', shortened to 64
// bytes with a hash suffix when longer. notes say what changed.
func importName(server, tool string) (string, []string) {
	var notes []string
	clean := []byte(tool)
	for i, c := range clean {
		if !toolname.NameByte(c) {
			clean[i] = '_'
		}
	}
	name := MCPPrefix + server + "__" + string(clean)
	if string(clean) != tool {
		notes = append(notes, fmt.Sprintf("%s: from %q; neither Anthropic nor OpenAI accept its characters outside [A-Za-z0-9_-]", name, tool))
	}
	if len(name) > toolname.MaxLen {
		sum := sha256.Sum256([]byte(tool))
		short := name[:toolname.MaxLen-9] + "_" + hex.EncodeToString(sum[:4])
		notes = append(notes, fmt.Sprintf("%s: from %q; names are at most %d bytes", short, tool, toolname.MaxLen))
		name = short
	}
	return name, notes
}
