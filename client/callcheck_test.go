package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/resolver"
)

// Client.TurnCallCheck over both transports: no turn is
// ErrNoTurn; a tool of the turn is callable with the client's channel and
// an allow decision; disabled mid-turn it is refused with a reason, not an
// error.
func TestCallCheckBothTransports(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := "callcheck-" + name
			if _, err := c.TurnCallCheck(ctx, client.CallCheckRequest{Session: s, Tool: "read_file"}); !errors.Is(err, client.ErrNoTurn) {
				t.Fatalf("call-check without a turn: %v, want ErrNoTurn", err)
			}
			if _, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: s}); err != nil {
				t.Fatal(err)
			}
			r, err := c.TurnCallCheck(ctx, client.CallCheckRequest{Session: s, Tool: "read_file"})
			if err != nil || !r.Callable || r.Reason != "callable" || r.Channel != "web" || r.Decision != "allow" || r.Tool == nil || r.Tool.Name != "read_file" {
				t.Fatalf("CallCheck read_file = %+v, %v", r, err)
			}
			if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("read_file")}}); err != nil {
				t.Fatal(err)
			}
			r, err = c.TurnCallCheck(ctx, client.CallCheckRequest{Session: s, Tool: "read_file"})
			if err != nil || r.Callable || r.Reason != "disabled" || r.Note == "" {
				t.Fatalf("CallCheck read_file after the disable = %+v, %v", r, err)
			}
		})
	}
}

// Client.RegistryDiff over both transports names the edited
// tool and the presets whose expansion changes, and a candidate that does
// not load is ErrInvalid.
func TestRegistryDiffBothTransports(t *testing.T) {
	var reg map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &reg); err != nil {
		t.Fatal(err)
	}
	reg["version"] = "client-diff-2"
	for _, x := range reg["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == "playwright_browser" {
			m["description"] = "Drives a browser (edited)."
		}
	}
	cand, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			imp, err := c.RegistryDiff(ctx, client.RegistryDiffRequest{Registry: cand})
			if err != nil {
				t.Fatal(err)
			}
			d := imp.Diff
			if d.To != "client-diff-2" || len(d.Changed) != 1 || d.Changed[0].Name != "playwright_browser" || d.Changed[0].Fields[0] != "description" || !d.AllHashesChange || len(d.Added)+len(d.Removed) != 0 {
				t.Fatalf("RegistryDiff = %+v", imp)
			}
			if _, err := c.RegistryDiff(ctx, client.RegistryDiffRequest{Registry: json.RawMessage(`{"version":"x"}`)}); !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("RegistryDiff of a bad registry: %v, want ErrInvalid", err)
			}
		})
	}
}
