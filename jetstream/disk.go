package jetstream

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/toolintent/engine/logport"
)

// DefaultMinFree is the free space the engine keeps on its store's disk by
// default (serve --min-free).
const DefaultMinFree = 64 << 20

// DiskGuard refuses appends while the disk under Dir has less than MinFree
// bytes free: a full disk is reported as such at once
// (ErrStorageFull) instead of an append that hangs until it times out,
// and appends resume by themselves when space returns.
type DiskGuard struct {
	// Dir is a directory on the store's disk.
	Dir string
	// MinFree is the free space, in bytes, below which appends are refused.
	MinFree uint64
	// Free returns the bytes free under a directory to an unprivileged
	// user; default statfs. Tests inject a full disk here.
	Free func(dir string) (uint64, error)
	// Every is how long a measurement is reused. Default 200ms; negative:
	// measure on every check.
	Every time.Duration

	mu      sync.Mutex
	checked time.Time
	last    error
}

// StatfsFree is the free space under dir that an unprivileged process may
// use (statfs f_bavail × f_bsize).
func StatfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Check returns an error matching ErrStorageFull when the disk is below
// MinFree ("disk full: N bytes free under DIR, need --min-free M"), nil
// otherwise. A failing measurement does not refuse appends.
func (g *DiskGuard) Check() error {
	if g == nil {
		return nil
	}
	every := g.Every
	if every == 0 {
		every = 200 * time.Millisecond
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if every > 0 && !g.checked.IsZero() && time.Since(g.checked) < every {
		return g.last
	}
	free := g.Free
	if free == nil {
		free = StatfsFree
	}
	n, err := free(g.Dir)
	g.checked = time.Now()
	g.last = nil
	if err == nil && n < g.MinFree {
		g.last = fmt.Errorf("%w: %d bytes free under %s, need --min-free %d", logport.ErrStorageFull, n, g.Dir, g.MinFree)
	}
	return g.last
}
