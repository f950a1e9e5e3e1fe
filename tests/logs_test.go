package tests

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// Every line the engine writes on stderr is JSON, the
// "serving" line included, with millisecond timestamps; a normal start
// and SIGTERM write no warning or error.
func TestLogsJSONAndQuietOnNormalExit(t *testing.T) {
	for _, level := range []string{"warn", "info"} {
		t.Run(level, func(t *testing.T) {
			p := startEngine(t, t.TempDir(), "--log-level", level)
			if _, err := p.runCLI(t, "emit", "logs1", "enable"); err != nil {
				t.Fatal(err)
			}
			p.Stop(t)
			ms := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)
			serving := 0
			for _, line := range strings.Split(strings.TrimSpace(p.Stderr.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Errorf("stderr line is not JSON: %q", line)
					continue
				}
				if ts, _ := m["time"].(string); !ms.MatchString(ts) {
					t.Errorf("time %q is not RFC 3339 with milliseconds: %s", ts, line)
				}
				if lv := m["level"]; lv == "warn" || lv == "error" || lv == "fatal" {
					t.Errorf("a %s on a normal run: %s", lv, line)
				}
				if msg, _ := m["message"].(string); strings.HasPrefix(msg, "engine serving") {
					serving++
					if m["http"] != strings.TrimPrefix(p.HTTPURL, "http://") || m["nats"] != p.NATSURL {
						t.Errorf("serving line without the addresses: %s", line)
					}
				}
			}
			if serving != 1 {
				t.Errorf("%d serving lines, want 1:\n%s", serving, p.Stderr)
			}
		})
	}
}
