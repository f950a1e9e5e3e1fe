//go:build unix

package searcheval

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used, so a
// benchmark can report the CPU an index build costs apart from the wall
// time another process's load on a shared machine adds.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
