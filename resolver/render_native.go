package resolver

import "sort"

// Provider-native deferral. The renderings of render.go put only
// the tools the model may call into the array and leave the deferred ones
// to the engine's catalog; loading one appends it to the array. These put
// every tool of the turn into the array once, the deferred ones marked
// defer_loading, so that the provider keeps their definitions out of the
// model's context until a search loads them, and a discovery changes no
// byte of the array: the cached prefix holds across discoveries.
//
// Formats, as documented by the providers:
//   - Anthropic Messages: a tool with "defer_loading": true is not loaded
//     until a tool_reference block ({"type":"tool_reference","tool_name":
//     ...}) in a tool_result names it; the search is either the engine's
//     own tool_search (a client tool whose result is tool_reference blocks)
//     or a server tool (tool_search_tool_bm25_20251119 or
//     tool_search_tool_regex_20251119) that Anthropic runs.
//   - OpenAI Responses: functions and namespaces ({"type":"namespace",
//     "name","description","tools":[...]}) with "defer_loading": true, and a
//     {"type":"tool_search","execution":"client"} tool whose call the client
//     answers with a tool_search_output item carrying the loaded
//     definitions; discovered tools are injected at the end of the context.

// Anthropic server search tools: the type a rendering names, and the name
// Anthropic gives the tool.
const (
	AnthropicSearchBM25      = "tool_search_tool_bm25_20251119"
	AnthropicSearchBM25Name  = "tool_search_tool_bm25"
	AnthropicSearchRegex     = "tool_search_tool_regex_20251119"
	AnthropicSearchRegexName = "tool_search_tool_regex"
)

const cacheMarker = `,"cache_control":{"type":"ephemeral"}`

// CacheMarker is the cache breakpoint the Anthropic renderings put on one
// tool: it is not part of the cached content, so a prefix comparison
// strips it (it moves when a tool is appended).
const CacheMarker = cacheMarker

// RenderAnthropicNative renders a turn's tools for Anthropic with
// provider-native deferral: the tools that are not deferred first,
// in order, the cache breakpoint on the last of them, then every deferred
// tool with "defer_loading":true, in order. server selects the search: ""
// renders tool_search as the client tool it is (the engine answers, with
// tool_reference blocks, RenderToolReferences); AnthropicSearchBM25 or
// AnthropicSearchRegex replace it by that server tool. Keys are in a fixed
// order and identical input gives identical bytes.
func RenderAnthropicNative(tools []Tool, server string) []byte {
	b := make([]byte, 0, renderSize(tools, 120))
	b = append(b, '[')
	lastResident := -1
	for i := range tools {
		if !tools[i].Deferred {
			lastResident = i
		}
	}
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	for i := range tools {
		t := &tools[i]
		if t.Deferred {
			continue
		}
		sep()
		if t.Name == ToolSearch && server != "" {
			b = append(b, `{"type":`...)
			b = appendJSONString(b, server)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, anthropicServerName(server))
		} else {
			b = appendAnthropicTool(b, t)
		}
		if i == lastResident {
			b = append(b, cacheMarker...)
		}
		b = append(b, '}')
	}
	for i := range tools {
		t := &tools[i]
		if !t.Deferred {
			continue
		}
		sep()
		b = appendAnthropicTool(b, t)
		b = append(b, `,"defer_loading":true}`...)
	}
	return append(b, ']')
}

func anthropicServerName(server string) string {
	if server == AnthropicSearchRegex {
		return AnthropicSearchRegexName
	}
	return AnthropicSearchBM25Name
}

// appendAnthropicTool writes {"name":..,"description":..,"input_schema":..
// without the closing brace.
func appendAnthropicTool(b []byte, t *Tool) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, t.Name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, t.Description)
	b = append(b, `,"input_schema":`...)
	return append(b, schemaBytes(t)...)
}

// RenderToolReferences renders the content of the tool_result that answers
// the engine's tool_search in the Anthropic native mode: one
// {"type":"tool_reference","tool_name":...} block per loaded tool, and a
// text block carrying note when it is not empty (unknown names, nothing
// found). Identical input gives identical bytes.
func RenderToolReferences(names []string, note string) []byte {
	b := make([]byte, 0, 64*len(names)+len(note)+32)
	b = append(b, '[')
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"tool_reference","tool_name":`...)
		b = appendJSONString(b, n)
		b = append(b, '}')
	}
	if note != "" {
		if len(names) > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = appendJSONString(b, note)
		b = append(b, '}')
	}
	return append(b, ']')
}

// RenderOpenAINative renders a turn's tools for the OpenAI Responses API
// with provider-native deferral: the functions outside namespaces in
// order (deferred ones with "defer_loading":true), then one
// {"type":"namespace"} per namespace (MCP server), sorted by name, holding
// its tools under their names within it (mcp__github__create_issue is
// create_issue in namespace github), then tool_search as
// {"type":"tool_search","execution":"client"} with the registry's
// description and parameters, which the engine answers
// (RenderToolSearchOutput). namespaces supplies descriptions. Identical
// input gives identical bytes.
func RenderOpenAINative(tools []Tool, namespaces []Namespace) []byte {
	b := make([]byte, 0, renderSize(tools, 110))
	b = append(b, '[')
	b, n := appendOpenAIGroups(b, tools, namespaces, true)
	for i := range tools {
		if t := &tools[i]; t.Name == ToolSearch {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"tool_search","execution":"client","description":`...)
			b = appendJSONString(b, t.Description)
			b = append(b, `,"parameters":`...)
			b = append(b, schemaBytes(t)...)
			b = append(b, '}')
			break
		}
	}
	return append(b, ']')
}

// RenderToolSearchOutput renders the tool_search_output item that answers
// a client-executed tool_search call in the OpenAI native mode: the loaded
// tools' definitions as RenderOpenAINative declares them (grouped into
// their namespaces). callID is the tool_search_call's call_id ("" omits
// it). Identical input gives identical bytes.
func RenderToolSearchOutput(callID string, loaded []Tool, namespaces []Namespace) []byte {
	b := make([]byte, 0, renderSize(loaded, 110)+96)
	b = append(b, `{"type":"tool_search_output"`...)
	if callID != "" {
		b = append(b, `,"call_id":`...)
		b = appendJSONString(b, callID)
	}
	b = append(b, `,"execution":"client","status":"completed","tools":[`...)
	b, _ = appendOpenAIGroups(b, loaded, namespaces, false)
	return append(b, "]}"...)
}

// appendOpenAIGroups writes the functions outside namespaces, in order,
// then one namespace entry per namespace, sorted by name, each with its
// tools in order; tool_search is left out when skipSearch. It returns the
// buffer and the number of entries written. One pass groups the tools.
func appendOpenAIGroups(b []byte, tools []Tool, namespaces []Namespace, skipSearch bool) ([]byte, int) {
	type group struct {
		name  string
		tools []int
	}
	var groups []group
	at := map[string]int{}
	n := 0
	for i := range tools {
		t := &tools[i]
		if skipSearch && t.Name == ToolSearch {
			continue
		}
		ns, _, ok := NamespaceOf(t.Name)
		if !ok {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = appendOpenAIFunction(b, t, t.Name)
			continue
		}
		k, seen := at[ns]
		if !seen {
			k = len(groups)
			at[ns] = k
			groups = append(groups, group{name: ns})
		}
		groups[k].tools = append(groups[k].tools, i)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	for _, g := range groups {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		desc := ""
		for i := range namespaces {
			if namespaces[i].Name == g.name {
				desc = namespaces[i].Description
				break
			}
		}
		b = append(b, `{"type":"namespace","name":`...)
		b = appendJSONString(b, g.name)
		b = append(b, `,"description":`...)
		b = appendJSONString(b, desc)
		b = append(b, `,"tools":[`...)
		for k, i := range g.tools {
			if k > 0 {
				b = append(b, ',')
			}
			_, short, _ := NamespaceOf(tools[i].Name)
			b = appendOpenAIFunction(b, &tools[i], short)
		}
		b = append(b, "]}"...)
	}
	return b, n
}

// appendOpenAIFunction writes one function definition named name.
func appendOpenAIFunction(b []byte, t *Tool, name string) []byte {
	b = append(b, `{"type":"function","name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, t.Description)
	b = append(b, `,"parameters":`...)
	b = append(b, schemaBytes(t)...)
	b = append(b, `,"strict":false`...)
	if t.Deferred {
		b = append(b, `,"defer_loading":true`...)
	}
	return append(b, '}')
}
