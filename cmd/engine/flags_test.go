package main

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// Every flag of `engine serve` has an environment variable
// ENGINE_<FLAG> (container and systemd deployments configure it so), and
// --help lists it.
func TestServeFlagsHaveEnv(t *testing.T) {
	var c cli
	p, err := kong.New(&c, kong.Vars{"override_help": overrideHelp, "version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	var serve *kong.Node
	for _, n := range p.Model.Children {
		if n.Name == "serve" {
			serve = n
		}
	}
	if serve == nil {
		t.Fatal("no serve command")
	}
	for _, f := range serve.Flags {
		if f.Name == "help" {
			continue
		}
		want := "ENGINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if len(f.Envs) == 0 || !strings.HasPrefix(f.Envs[0], "ENGINE_") {
			t.Errorf("serve --%s has no ENGINE_ environment variable (want %s)", f.Name, want)
		}
	}
}
