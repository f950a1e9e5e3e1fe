package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Turn.discover takes the model's tool_search input as written: exact
// names, a keyword query, a regex, max_results. Unknown names and empty or
// unmatched searches are soft results of a successful call, on both
// transports; only input outside the schema is 400, naming the field.
func TestToolSearchForms(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "search-" + strings.ReplaceAll(t.Name(), "/", "-")
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s, Provider: service.ProviderAnthropicEngine}); err != nil {
			t.Fatal(err)
		}
		// All names unknown: 200, not found, nothing loaded.
		r, err := c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(`{"names":["ghost","Not A Tool"]}`))
		if err != nil {
			t.Fatalf("unknown names: %v, want a soft result", err)
		}
		if len(r.Tools)+len(r.Loaded) != 0 || !slices.Equal(r.NotFound, []string{"ghost", "Not A Tool"}) || r.Note == "" {
			t.Fatalf("unknown names: %+v", r)
		}
		// Empty input: 200 with a note.
		if r, err = c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(`{}`)); err != nil || r.Note == "" || len(r.Tools) != 0 {
			t.Fatalf("empty input: %+v, %v", r, err)
		}
		// A keyword query loads the best match and the view appends it.
		r, err = c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(`{"query":"take a screenshot of the web page","max_results":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Loaded, []string{"playwright_browser"}) || len(r.Matches) != 1 || r.Matches[0].Via != "query" {
			t.Fatalf("query: loaded %v matches %+v", r.Loaded, r.Matches)
		}
		if p := r.View.Provider; p[len(p)-1] != "playwright_browser" || slices.Contains(r.View.Catalog, "playwright_browser") {
			t.Fatalf("query: provider %v catalog %v", p, r.View.Catalog)
		}
		var out struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(r.Output, &out); err != nil || len(out.Tools) != 1 || out.Tools[0].Name != "playwright_browser" {
			t.Fatalf("output %s: %v", r.Output, err)
		}
		// A regex, and a regex that does not compile (soft).
		if r, err = c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(`{"regex":"^send_"}`)); err != nil || !slices.Equal(r.Loaded, []string{"send_message"}) {
			t.Fatalf("regex: %+v, %v", r, err)
		}
		if r, err = c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(`{"regex":"(unclosed"}`)); err != nil || !strings.Contains(r.Note, "regex") {
			t.Fatalf("bad regex: %+v, %v", r, err)
		}
		// Outside the schema: 400 naming the field.
		for raw, want := range map[string]string{
			`{"query":5}`:          "query",
			`{"max_results":0}`:    "max_results",
			`{"limit":3}`:          `"limit"`,
			`{"names":"x"}`:        "names",
			`"query"`:              "JSON object",
			`{"query":null}`:       "query",
			`{"max_results":2.5}`:  "max_results",
			`{"names":["","a"]}`:   "names[0]",
			`{"regex":"a","q":""}`: `"q"`,
		} {
			_, err := c.ToolSearch(ctx, s, service.ProviderAnthropicEngine, json.RawMessage(raw))
			ae := asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
			if !strings.Contains(ae.Message, want) {
				t.Errorf("input %s: message %q does not name %s", raw, ae.Message, want)
			}
		}
		// input and names together are refused.
		var both struct{}
		err = c.c.Do(ctx, wire.OpDiscover, &wire.DiscoverRequest{Session: s, Input: json.RawMessage(`{}`), Names: []string{"a"}}, &both)
		asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
	})
}
