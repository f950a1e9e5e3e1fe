package checkpoint_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

const exampleRegistry = `{
  "version": "v1",
  "tools": [
    {"name": "read_file", "description": "Read a file.", "permission": "read",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "tool_search", "description": "Load deferred tools by name.", "permission": "read",
     "parameters": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}}},
    {"name": "send_message", "description": "Send a message to another session.", "permission": "interactive",
     "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}}}}
  ],
  "default_tools": ["read_file", "tool_search", "send_message"],
  "deferred_default_tools": ["send_message"]
}`

func exampleResolution(registry string) *resolver.Resolution {
	reg, err := resolver.Load([]byte(registry))
	if err != nil {
		panic(err)
	}
	res, err := reg.Resolve(resolver.Request{})
	if err != nil {
		panic(err)
	}
	return res
}

// Record the loaded deferred tools with their contract; a resident
// tool is refused.
func ExampleNew() {
	res := exampleResolution(exampleRegistry)
	rec, err := checkpoint.New(3, res, []string{"send_message"})
	fmt.Println(rec.Loaded, rec.RegistryVersion, rec.ContractHash == res.ContractHash, len(rec.Contract), err)

	_, err = checkpoint.New(3, res, []string{"read_file"})
	fmt.Println(errors.Is(err, checkpoint.ErrNotInContract))
	// Output:
	// [send_message] v1 true 1 <nil>
	// true
}

// Resume restores the loaded set against an unchanged contract;
// once a loaded tool's schema changed, that tool is dropped, with the
// reason, per tool.
func ExampleResume() {
	rec, _ := checkpoint.New(3, exampleResolution(exampleRegistry), []string{"send_message"})

	out := checkpoint.Resume(&rec, exampleResolution(exampleRegistry))
	fmt.Println(out.OK, out.Restored)

	changed := strings.Replace(exampleRegistry, `"text": {"type": "string"}`, `"body": {"type": "string"}`, 1)
	out = checkpoint.Resume(&rec, exampleResolution(changed))
	fmt.Println(out.OK, out.Restored)
	fmt.Println(out.Reason)
	for _, d := range out.Tools {
		fmt.Println(d.Tool, d.Kind)
	}
	fmt.Println(errors.Is(out.Err(), checkpoint.ErrContractChanged))
	// Output:
	// true [send_message]
	// false []
	// contract hash changed: tool "send_message" changed (schema, description, permission, availability or deferral mark); restored 0 of 1 loaded deferred tool(s); not restored: send_message (changed)
	// send_message changed
	// true
}

// Record a dispatch's resident/deferred classification.
func ExampleClassify() {
	res := exampleResolution(exampleRegistry)
	turn := deferral.Freeze(1, res, nil)
	d := checkpoint.Classify(1, res, turn.Request())
	fmt.Println("resident:", d.Resident, "deferred:", d.Deferred, "loaded:", d.Loaded)
	// Output:
	// resident: [read_file tool_search] deferred: [send_message] loaded: []
}
