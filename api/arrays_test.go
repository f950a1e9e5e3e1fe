package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// nullPaths lists the paths of every null in a decoded JSON value.
func nullPaths(v any, path string, out *[]string) {
	switch x := v.(type) {
	case nil:
		*out = append(*out, path)
	case map[string]any:
		for k, e := range x {
			nullPaths(e, path+"."+k, out)
		}
	case []any:
		for i, e := range x {
			nullPaths(e, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

// Lists in replies are [], never null — on resolve, turn/begin,
// turn/discover of an unknown name, an empty override and a session whose
// tools are switched off, over both transports.
func TestRepliesHaveArraysNotNull(t *testing.T) {
	env := newEnv(t, Config{})
	for _, transport := range []string{"nats", "http"} {
		t.Run(transport, func(t *testing.T) {
			s := "arr-" + transport
			off := "off-" + transport
			steps := []struct{ op, req string }{
				{"resolve", `{"session":"` + s + `"}`},
				{"resolve", `{"session":"` + s + `","override":{"kind":"empty"}}`},
				{"turn-begin", `{"session":"` + s + `","override":{"kind":"empty"}}`},
				{"turn-discover", `{"session":"` + s + `","names":["no_such_tool"]}`},
				{"turn-dispatch", `{"session":"` + s + `"}`},
				{"turn-end", `{"session":"` + s + `"}`},
				{"turn-begin", `{"session":"` + s + `"}`},
				{"turn-discover", `{"session":"` + s + `","names":["no_such_tool"]}`},
				{"append", `{"session":"` + off + `","commands":[{"type":"ToolsToggled","enabled":false}]}`},
				{"resolve", `{"session":"` + off + `","min_seq":1}`},
				{"turn-begin", `{"session":"` + off + `"}`},
				{"turn-dispatch", `{"session":"` + off + `"}`},
				{"intent", `{"session":"` + off + `"}`},
				{"history", `{"session":"` + off + `"}`},
			}
			for _, st := range steps {
				body, status := callDocumented(t, env, transport, st.op, st.req)
				if status != http.StatusOK {
					t.Fatalf("%s %s: status %d: %s", st.op, st.req, status, body)
				}
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Fatalf("%s: %v: %s", st.op, err, body)
				}
				var all, nulls []string
				nullPaths(v, "", &all)
				for _, p := range all {
					// A TurnStarted's intent.picked is null when no list
					// was picked and [] when an empty one was: a stored
					// event's field, not a reply list.
					if !strings.HasSuffix(p, ".payload.intent.picked") {
						nulls = append(nulls, p)
					}
				}
				sort.Strings(nulls)
				if len(nulls) > 0 {
					t.Errorf("%s %s over %s: null at %v: %s", st.op, st.req, transport, nulls, body)
				}
			}
		})
	}
}
