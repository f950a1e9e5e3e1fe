package service

import "time"

// SetRecordRecheck sets how long an engine trusts that the registry
// history holds a registry it recorded, for a test; the returned
// func restores it.
func SetRecordRecheck(d time.Duration) func() {
	old := recordRecheck
	recordRecheck = d
	return func() { recordRecheck = old }
}
