package deferral_test

import (
	"fmt"
	"strings"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

const exampleRegistry = `{
 "version": "example-1",
 "tools": [
  {"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}}},"available":true,"permission":"read"},
  {"name":"playwright_browser","description":"Drive a browser.","parameters":{"type":"object","properties":{"url":{"type":"string"}}},"available":true,"permission":"network"},
  {"name":"send_message","description":"Message another session.","parameters":{"type":"object","properties":{"to":{"type":"string"}}},"available":true,"permission":"write"},
  {"name":"tool_search","description":"Load deferred tools.","parameters":{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"}}}},"available":true,"permission":"read"}
 ],
 "default_tools": ["read_file","playwright_browser","send_message","tool_search"],
 "deferred_default_tools": ["playwright_browser","send_message"]
}`

func providerNames(s deferral.Split) string {
	var n []string
	for _, t := range s.Provider {
		n = append(n, t.Name)
	}
	return strings.Join(n, " ")
}

// A turn is frozen at its start; tool_search loads a deferred tool, and the
// next provider request of the turn carries its schema.
func ExampleFreeze() {
	reg, err := resolver.Load([]byte(exampleRegistry))
	if err != nil {
		fmt.Println(err)
		return
	}
	on := true
	res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: &on}})
	if err != nil {
		fmt.Println(err)
		return
	}
	turn := deferral.Freeze(1, res, nil) // nothing loaded yet in this session

	s := turn.Request()
	fmt.Println("provider:", providerNames(s))
	fmt.Print(deferral.CatalogText(s.Catalog))

	// The model calls tool_search with {"query": "browser"}.
	found, err := turn.Search(deferral.SearchRequest{Query: "browser"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("loaded:", found.Loaded, "schema:", string(found.Tools[0].Parameters))

	s = turn.Request()
	fmt.Println("provider:", providerNames(s)) // appended after the frozen array
	fmt.Println("catalog:", s.Catalog)

	missing := turn.Load("web_search") // not in this turn: a soft "not found"
	fmt.Println("not found:", missing.NotFound)

	exec, _ := turn.Lookup("playwright_browser")
	fmt.Println("execute with permission:", exec.Permission, "discovered:", turn.Discovered())
	// Output:
	// provider: read_file tool_search
	// Deferred tools (load with tool_search):
	// playwright_browser
	// send_message
	// loaded: [playwright_browser] schema: {"properties":{"url":{"type":"string"}},"type":"object"}
	// provider: read_file tool_search playwright_browser
	// catalog: [send_message]
	// not found: [web_search]
	// execute with permission: network discovered: [playwright_browser]
}

// SplitTools routes each resolved tool to the provider array or the
// catalog.
func ExampleSplitTools() {
	tools := []resolver.Tool{
		{Name: "read_file", Available: true},
		{Name: "playwright_browser", Available: true, Deferred: true},
		{Name: "send_message", Available: true, Deferred: true},
		{Name: "tool_search", Available: true},
	}
	s := deferral.SplitTools(tools, deferral.NewSet("send_message").Has)
	fmt.Println("provider:", providerNames(s))
	fmt.Println("catalog:", s.Catalog)
	for _, c := range s.Classification {
		fmt.Printf("%s resident=%v deferred=%v loaded=%v\n", c.Name, c.Resident, c.Deferred, c.Loaded)
	}
	// Output:
	// provider: read_file tool_search send_message
	// catalog: [playwright_browser]
	// read_file resident=true deferred=false loaded=false
	// playwright_browser resident=false deferred=true loaded=false
	// send_message resident=false deferred=true loaded=true
	// tool_search resident=true deferred=false loaded=false
}

// Estimate prices both halves of a split without a tokenizer.
func ExampleEstimate() {
	tools := []resolver.Tool{
		{Name: "read_file", Description: "Read a file from the local filesystem.", Parameters: []byte(`{"properties":{"path":{"type":"string"}},"type":"object"}`)},
		{Name: "playwright_browser", Deferred: true},
	}
	b := deferral.Estimate(deferral.SplitTools(tools, nil))
	fmt.Printf("resident %d tokens (%d tools), catalog %d tokens (%d names), total %d\n",
		b.Resident, b.ResidentTools, b.Catalog, b.DeferredTools, b.Total)
	// Output:
	// resident 43 tokens (1 tools), catalog 12 tokens (1 names), total 55
}

// Table measures the default session's budget with the real tokenizer;
// the budget command prints it.
func ExampleTable() {
	tab, err := deferral.Table(resolver.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("deferred:", tab.Deferred)
	fmt.Println("reachable:", tab.Reachable())
	fmt.Println("saves over a third:", tab.ReductionPercent > 33)
	// Output:
	// deferred: [playwright_browser enter_plan_mode exit_plan_mode send_message]
	// reachable: true
	// saves over a third: true
}
