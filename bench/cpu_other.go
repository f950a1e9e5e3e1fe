//go:build !unix

package bench

import "time"

// processCPU is unknown on this system: 0.
func processCPU() time.Duration { return 0 }
