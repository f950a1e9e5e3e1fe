package natstest

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// mesh is a cluster's route links, one for each ordered pair of nodes,
// and the nodes Partition (or Blackhole) cut off. Both cluster kinds
// partition and heal a node through it.
type mesh struct {
	links map[[2]int]*link // links[{a, b}] carries routes dialled by a to b

	mu          sync.Mutex
	partitioned map[int]bool
}

func newMesh() *mesh {
	return &mesh{links: map[[2]int]*link{}, partitioned: map[int]bool{}}
}

// connect starts a link for every ordered pair of n nodes. It fails t,
// its message prefixed with who, when a link does not start; the links
// started so far are closed by close.
func (m *mesh) connect(t testing.TB, who string, n int) {
	t.Helper()
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a == b {
				continue
			}
			l, err := newLink()
			if err != nil {
				t.Fatalf("%s: start route proxy %d→%d: %v", who, a, b, err)
			}
			m.links[[2]int{a, b}] = l
		}
	}
}

// addr is the address node a dials for its route to node b.
func (m *mesh) addr(a, b int) string { return m.links[[2]int{a, b}].addr() }

// target points every link to node i at its cluster port.
func (m *mesh) target(i, clusterPort int) {
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(clusterPort))
	for k, l := range m.links {
		if k[1] == i {
			l.setTarget(target)
		}
	}
}

// isolate marks node i partitioned and applies cut to every link to and
// from it.
func (m *mesh) isolate(i int, cut func(*link)) {
	m.mu.Lock()
	m.partitioned[i] = true
	m.mu.Unlock()
	m.each(i, cut)
}

// heal clears node i's partition and lets its links carry traffic again:
// a stall ends (its connections are closed), a cut is lifted.
func (m *mesh) heal(i int) {
	m.mu.Lock()
	m.partitioned[i] = false
	m.mu.Unlock()
	m.each(i, func(l *link) {
		l.setStalled(false)
		l.setCut(false)
	})
}

// each calls f on every link to or from node i.
func (m *mesh) each(i int, f func(*link)) {
	for k, l := range m.links {
		if k[0] == i || k[1] == i {
			f(l)
		}
	}
}

// isPartitioned reports whether node i is cut off.
func (m *mesh) isPartitioned(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partitioned[i]
}

// close closes every link.
func (m *mesh) close() {
	for _, l := range m.links {
		l.close()
	}
}
