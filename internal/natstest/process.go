package natstest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The nats-server binary, built once per test binary from the module in
// go.mod (so the process cluster runs the same server version as the
// in-process one).
var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ServerBinary builds nats-server from the module required by go.mod
// (go build github.com/nats-io/nats-server/v2) into a temporary directory,
// once per test binary, and returns its path.
func ServerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natstest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build nats-server: %w\n%s", err, b)
			return
		}
		buildPath = out
	})
	if buildErr != nil {
		t.Fatalf("natstest: %v", buildErr)
	}
	return buildPath
}

// ProcessOptions configure a ProcessCluster.
type ProcessOptions struct {
	// Nodes is the number of servers. Default 3.
	Nodes int
	// SyncAlways sets the JetStream option sync_interval: always (fsync
	// before every acknowledgement); false keeps nats-server's default
	// (a flush every 2 minutes).
	SyncAlways bool
}

// ProcessCluster is a clustered JetStream of nats-server processes (the
// binary built by ServerBinary), each with its own store directory in
// t.TempDir() and random loopback ports that stay the same across
// restarts. Kill sends SIGKILL: the process dies with whatever it had not
// written, as on a crash. Routes between nodes go through TCP proxies
// (links, as in JSCluster), so Partition and Heal cut and restore a node's
// routes while it runs. Every process is killed by t.Cleanup (and by the
// kernel when the test binary dies: Pdeathsig).
//
// Methods must be called from the test goroutine.
type ProcessCluster struct {
	t    testing.TB
	name string
	bin  string
	opts ProcessOptions

	mu    sync.Mutex
	nodes []*procNode
	mesh  *mesh

	ncOnce sync.Once
	nc     *nats.Conn
}

type procNode struct {
	name        string
	dir         string
	clientPort  int
	clusterPort int
	httpPort    int
	advertise   string
	release     func()
	cmd         *exec.Cmd
	exited      chan struct{}
	started     bool // has run once: its client and cluster ports are fixed
}

// StartProcessCluster builds nats-server if needed, starts the nodes and
// waits until the cluster has formed (routes up, a meta leader that knows
// every peer). Set NATSTEST_LOG=1 to copy the servers' logs to stderr;
// otherwise each node logs to server.log in its directory.
func StartProcessCluster(t testing.TB, opts ProcessOptions) *ProcessCluster {
	t.Helper()
	c := NewProcessCluster(t, opts)
	for i := range c.nodes {
		c.Start(i)
	}
	c.WaitFormed(clusterFormWait)
	return c
}

// NewProcessCluster prepares a cluster (binary, directories, ports, route
// links) without starting any node: its URLs are known before anything
// listens on them. Start the nodes with Start.
func NewProcessCluster(t testing.TB, opts ProcessOptions) *ProcessCluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	c := &ProcessCluster{
		t: t, bin: ServerBinary(t), opts: opts,
		name: fmt.Sprintf("P%d", time.Now().UnixNano()%100000),
		mesh: newMesh(),
	}
	dirs := make([]string, opts.Nodes)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(c.shutdown)
	for i := 0; i < opts.Nodes; i++ {
		adv, release, err := refusingAddr()
		if err != nil {
			t.Fatalf("natstest: reserve an advertise address: %v", err)
		}
		ports, err := freePorts(3)
		if err != nil {
			t.Fatalf("natstest: pick ports: %v", err)
		}
		c.nodes = append(c.nodes, &procNode{
			name: fmt.Sprintf("n%d", i), dir: dirs[i], advertise: adv, release: release,
			clientPort: ports[0], clusterPort: ports[1], httpPort: ports[2],
		})
	}
	c.mesh.connect(t, "natstest", opts.Nodes)
	for i, nd := range c.nodes {
		c.mesh.target(i, nd.clusterPort)
	}
	return c
}

// freePorts picks n distinct free loopback ports (bound, then released:
// another process could take one meanwhile, which the start reports).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// config is node i's nats-server configuration file.
func (c *ProcessCluster) config(i int) string {
	nd := c.nodes[i]
	var routes []string
	for j := range c.nodes {
		if j != i {
			routes = append(routes, fmt.Sprintf("%q", "nats-route://"+c.mesh.addr(i, j)))
		}
	}
	sync := ""
	if c.opts.SyncAlways {
		sync = "\n  sync_interval: always"
	}
	return fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q%s
}
cluster {
  name: %s
  listen: "127.0.0.1:%d"
  advertise: %q
  routes: [%s]
}
`, nd.name, nd.clientPort, nd.httpPort, filepath.Join(nd.dir, "store"), sync, c.name, nd.clusterPort, nd.advertise, strings.Join(routes, ", "))
}

// N is the number of nodes.
func (c *ProcessCluster) N() int { return len(c.nodes) }

// Name is the cluster name.
func (c *ProcessCluster) Name() string { return c.name }

// NodeName is node i's server name (n0, n1, ...).
func (c *ProcessCluster) NodeName(i int) string { return c.nodes[i].name }

// StoreDir is node i's JetStream store directory.
func (c *ProcessCluster) StoreDir(i int) string { return filepath.Join(c.nodes[i].dir, "store") }

// ClientURL is node i's client URL (stable across restarts).
func (c *ProcessCluster) ClientURL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].clientPort)
}

// URLs is every node's client URL, comma-joined, in node order.
func (c *ProcessCluster) URLs() string { return c.URLsFrom(0) }

// URLsFrom is URLs rotated to start at node i: with nats.DontRandomize a
// client then connects to node i first and fails over to the others.
func (c *ProcessCluster) URLsFrom(i int) string {
	urls := make([]string, len(c.nodes))
	for k := range c.nodes {
		urls[k] = c.ClientURL((i + k) % len(c.nodes))
	}
	return strings.Join(urls, ",")
}

// Running reports whether node i's process runs.
func (c *ProcessCluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].cmd != nil
}

// Start starts node i's process (on its ports and store) and waits until
// it accepts client connections. It does not wait for the node to rejoin:
// see WaitFormed. Ports are picked free but can be taken by another
// process before the node binds them: a node that never ran then gets new
// ports, a restarted one a new monitoring port (its client and cluster
// ports are its identity) or another try.
func (c *ProcessCluster) Start(i int) {
	c.t.Helper()
	if c.Running(i) {
		c.t.Fatalf("natstest: Start(%d): node is running", i)
	}
	nd := c.nodes[i]
	for try := 1; ; try++ {
		log, taken := c.startOnce(i)
		if log == "" {
			nd.started = true
			return
		}
		if !taken || try == 5 {
			c.t.Fatalf("natstest: %s exited at start: %s", nd.name, log)
		}
		ports, err := freePorts(3)
		if err != nil {
			c.t.Fatalf("natstest: pick ports: %v", err)
		}
		switch {
		case !nd.started:
			nd.clientPort, nd.clusterPort, nd.httpPort = ports[0], ports[1], ports[2]
			c.mesh.target(i, nd.clusterPort)
		case strings.Contains(log, "monitor"):
			nd.httpPort = ports[2]
		default:
			time.Sleep(200 * time.Millisecond) // the old process's port, being released
		}
	}
}

// startOnce starts node i's process and waits until it accepts clients.
// It returns "" then, or the end of the node's log when it exited, and
// whether it exited because a port was taken.
func (c *ProcessCluster) startOnce(i int) (string, bool) {
	c.t.Helper()
	nd := c.nodes[i]
	conf := filepath.Join(nd.dir, "server.conf")
	if err := os.WriteFile(conf, []byte(c.config(i)), 0o644); err != nil {
		c.t.Fatalf("natstest: write %s: %v", conf, err)
	}
	logPath := filepath.Join(nd.dir, "server.log")
	cmd := exec.Command(c.bin, "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var from int64 // this start's part of the log
	if fi, err := os.Stat(logPath); err == nil {
		from = fi.Size()
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatalf("natstest: open log of %s: %v", nd.name, err)
	}
	defer f.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = f, f
	if os.Getenv("NATSTEST_LOG") != "" {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(f, prefixWriter(nd.name)), io.MultiWriter(f, prefixWriter(nd.name))
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("natstest: start %s: %v", nd.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.mu.Lock()
	nd.cmd, nd.exited = cmd, exited
	c.mu.Unlock()
	deadline := time.Now().Add(nodeReadyWait)
	for {
		select {
		case <-exited:
			c.mu.Lock()
			nd.cmd = nil
			c.mu.Unlock()
			log, _ := os.ReadFile(logPath)
			log = log[min(from, int64(len(log))):]
			return tail(log, 2000), strings.Contains(string(log), "address already in use")
		default:
		}
		// Started means listening on every port, not only the client's:
		// nats-server listens for clients first and for routes last, and
		// dies (FTL) if that port is taken, so a client port that answers
		// alone is no start (a CI run here took such a node for started;
		// the cluster never formed). Its log says when routes listen.
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.clientPort)), time.Second)
		if err == nil {
			_ = conn.Close()
			if log, _ := os.ReadFile(logPath); strings.Contains(string(log[min(from, int64(len(log))):]), "Listening for route connections") {
				return "", false
			}
			err = errors.New("not listening for routes yet")
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: %s does not accept clients after %s: %v", nd.name, nodeReadyWait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withoutRouteChurn drops a server log's "Route connection created" and
// "Router connection closed" lines: a node redials a partitioned node
// many times a second, and those lines would fill the tail a failing test
// prints, hiding elections and warnings.
func withoutRouteChurn(log []byte) []byte {
	var out []byte
	for line := range bytes.Lines(log) {
		if bytes.Contains(line, []byte("Route connection created")) || bytes.Contains(line, []byte("Router connection closed")) {
			continue
		}
		out = append(out, line...)
	}
	return out
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Kill sends SIGKILL to node i's process and waits until it is gone. Its
// store directory and ports are kept for Start.
func (c *ProcessCluster) Kill(i int) {
	c.t.Helper()
	c.mu.Lock()
	nd := c.nodes[i]
	cmd, exited := nd.cmd, nd.exited
	nd.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("natstest: Kill(%d): node is not running", i)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Restart kills node i (SIGKILL) and starts it again on its store.
func (c *ProcessCluster) Restart(i int) {
	c.t.Helper()
	c.Kill(i)
	c.Start(i)
}

// Partition cuts every route link to and from node i; the node keeps
// running and keeps its clients.
func (c *ProcessCluster) Partition(i int) {
	c.mesh.isolate(i, func(l *link) { l.setCut(true) })
}

// Heal restores node i's route links and waits until the cluster has
// formed again.
func (c *ProcessCluster) Heal(i int) {
	c.t.Helper()
	c.mesh.heal(i)
	c.WaitFormed(clusterFormWait)
}

func (c *ProcessCluster) shutdown() {
	if c.t.Failed() { // the servers' side of the story
		for _, nd := range c.nodes {
			log, _ := os.ReadFile(filepath.Join(nd.dir, "server.log"))
			c.t.Logf("natstest: end of %s's log, without its route redials:\n%s", nd.name, tail(withoutRouteChurn(log), 6000))
		}
	}
	if c.nc != nil {
		c.nc.Close()
	}
	for _, nd := range c.nodes {
		c.mu.Lock()
		cmd, exited := nd.cmd, nd.exited
		nd.cmd = nil
		c.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}
	}
	c.mesh.close()
	for _, nd := range c.nodes {
		nd.release()
	}
}

// prefixWriter copies a server's output to stderr, each write prefixed
// with the node's name.
type prefixWriter string

func (p prefixWriter) Write(b []byte) (int, error) {
	fmt.Fprintf(os.Stderr, "[%s] %s", string(p), b)
	return len(b), nil
}
