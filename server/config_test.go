package server

import (
	"strings"
	"testing"
)

// #25 item 6 (STYLE 9): a zero Config is usable — its defaults are those
// documented — and Validate names every bad field at once.
func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Data != DefaultData || c.Prefix != DefaultPrefix || c.Replicas != 1 || c.Listen != DefaultListen || c.Sync != "interval" {
		t.Errorf("store defaults: %+v", c.Store)
	}
	if c.Registry == nil || c.API.SubjectPrefix != "tools.api" || c.HTTPMaxConns != DefaultHTTPMaxConns ||
		c.HTTPReadTimeout != DefaultHTTPReadTimeout || c.MinFree != DefaultMinFree ||
		c.MaxProjectionLag != DefaultMaxProjectionLag || c.ShutdownTimeout != DefaultShutdownTimeout || c.HTTP != "" || c.NoProjection {
		t.Errorf("serve defaults: %+v", c)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	err := Config{Store: Store{Sync: "never", Replicas: -1}}.Validate()
	if err == nil {
		t.Fatal("bad Config: no error")
	}
	for _, want := range []string{"--sync", "--replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}
