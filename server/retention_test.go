package server

import (
	"strings"
	"testing"
	"time"
)

// Retention durations take days (d) and Go's units, combined; zero,
// negative and malformed values are refused with an example of the fix.
func TestParseRetainDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90d": 90 * 24 * time.Hour, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour, "30m": 30 * time.Minute, " 7d ": 7 * 24 * time.Hour, "1d30s": 24*time.Hour + 30*time.Second,
	} {
		if got, err := ParseRetainDuration(in); err != nil || got != want {
			t.Errorf("ParseRetainDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "0s", "-3h", "9x", "d", "1.5d", "-1d", "90days", "99999999999d", "1d-30h"} {
		if got, err := ParseRetainDuration(in); err == nil || !strings.Contains(err.Error(), "90d") && !strings.Contains(err.Error(), "days") {
			t.Errorf("ParseRetainDuration(%q) = %v, %v; want an error with an example", in, got, err)
		}
	}
}

// A bad retention setting in Config is refused naming its flag.
func TestConfigValidateRetention(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		flag string
	}{
		{Config{RetainIdle: -time.Hour}, "--retain-idle"},
		{Config{RetainAction: "archive"}, "--retain-action"},
		{Config{RetainTick: -time.Second}, "--retain-tick"},
		{Config{RetainBatch: -1}, "--retain-batch"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("Validate(%+v) = %v; want an error naming %s", c.cfg, err, c.flag)
		}
	}
	if err := (Config{RetainIdle: 90 * 24 * time.Hour, RetainAction: "erase"}).Validate(); err != nil {
		t.Errorf("a valid retention config: %v", err)
	}
}
