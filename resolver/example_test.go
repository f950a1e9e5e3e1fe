package resolver_test

import (
	"fmt"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

const exampleRegistry = `{
  "version": "example-1",
  "tools": [
    {"name": "read_file", "description": "Read a file.", "permission": "read",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "bash", "description": "Run a command.", "permission": "exec", "parameters": {"type": "object"}},
    {"name": "tool_search", "description": "Load deferred tools.", "parameters": {"type": "object"}},
    {"name": "send_message", "description": "Message another session.", "parameters": {"type": "object"}},
    {"name": "web_search", "description": "Search the web.", "permission": "network", "parameters": {"type": "object"}}
  ],
  "default_tools": ["read_file", "bash", "tool_search", "send_message"],
  "deferred_default_tools": ["send_message"],
  "presets": {"research": ["read_file", "tool_search", "web_search"]},
  "profiles": {"reader": {"allowed": ["read_file", "tool_search"]}}
}`

// A session stores only its intent; the tool list is expanded from
// the live registry on every request.
func ExampleRegistry_Resolve() {
	reg, err := resolver.Load([]byte(exampleRegistry))
	if err != nil {
		fmt.Println(err)
		return
	}
	on, off := true, false
	for _, req := range []resolver.Request{
		{Session: intent.Intent{Enabled: &on, WebSearch: &on, Disabled: []string{"bash"}}},
		{Profile: "reader"},
		{Session: intent.Intent{Enabled: &off, WebSearch: &on}}, // web_search is deferred here: tool_search comes with it
		{Override: intent.Override{Kind: intent.OverrideNames, Names: []string{"bash", "ghost"}}},
	} {
		res, err := reg.Resolve(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Source, res.Names(), "unknown:", res.Unknown)
	}
	send, _ := reg.Tool("send_message")
	fmt.Println("send_message deferred:", send.Deferred)
	// Output:
	// session-intent [read_file tool_search send_message web_search] unknown: []
	// profile [read_file tool_search] unknown: []
	// session-intent [web_search tool_search] unknown: []
	// override-names [bash] unknown: [ghost]
	// send_message deferred: true
}

// Explain says which rule put a tool in the set or left it out.
func ExampleRegistry_Explain() {
	reg, _ := resolver.Load([]byte(exampleRegistry))
	req := resolver.Request{Session: intent.Intent{Preset: "research"}}
	for _, name := range []string{"web_search", "bash"} {
		ex := reg.Explain(req, name)
		fmt.Println(ex.Tool, ex.Included, ex.Rule)
		fmt.Println(" ", ex.Detail)
	}
	// Output:
	// web_search true preset:research
	//   the session intent chose preset "research", which includes "web_search" in registry example-1
	// bash false not-in-preset:research
	//   the session intent chose preset "research", which does not include "bash" in registry example-1
}

// Rendering is byte-identical for identical input; the cache
// breakpoint is on the last tool.
func ExampleRenderAnthropic() {
	reg, _ := resolver.Load([]byte(exampleRegistry))
	res, _ := reg.Resolve(resolver.Request{Override: intent.Override{Kind: intent.OverrideNames, Names: []string{"read_file", "bash"}}})
	fmt.Println(string(resolver.RenderAnthropic(res.Tools)))
	fmt.Println(string(resolver.RenderOpenAI(res.Tools[:1])))
	// Output:
	// [{"name":"read_file","description":"Read a file.","input_schema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},{"name":"bash","description":"Run a command.","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]
	// [{"type":"function","name":"read_file","description":"Read a file.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"strict":false}]
}

// A registry file is validated as a whole; every problem is reported.
func ExampleLoad() {
	_, err := resolver.Load([]byte(`{"version":"v1",
	  "tools":[{"name":"tool_search","description":"Load tools.","parameters":{"type":"object"}}],
	  "default_tools":["tool_search","web_search"],
	  "presets":{"full":["tool_search","ghost"]}}`))
	fmt.Println(err)
	// Output:
	// load registry: invalid registry: default_tools[1]: unknown tool "web_search"; add it to tools or remove it from the list
	// invalid registry: default_tools: contains "web_search"; remove it, the web_search overlay adds it on request (see docs/semantics.md#overlay)
	// invalid registry: presets.full[1]: unknown tool "ghost"; add it to tools or remove it from the list
}

// The contract hash of a resolution covers its tools and the registry
// version.
func ExampleContractHash() {
	reg, _ := resolver.Load([]byte(exampleRegistry))
	res, _ := reg.Resolve(resolver.Request{})
	fmt.Println(res.ContractHash == resolver.ContractHash(reg.Version(), res.Tools), len(res.ContractHash))
	// Output:
	// true 64
}
