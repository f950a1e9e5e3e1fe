package server

import (
	"strings"
	"testing"
	"time"
)

// --retain-action compact is a valid retention action; an unknown
// action is refused naming the three.
func TestRetainActionCompactValid(t *testing.T) {
	c := Config{RetainIdle: 90 * 24 * time.Hour, RetainAction: "compact"}
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "retain") {
		t.Fatalf("compact refused: %v", err)
	}
	c.RetainAction = "shred"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "delete, erase or compact") {
		t.Fatalf("unknown action: %v", err)
	}
}
