package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// benchCluster is a 3-node JetStream cluster in this process, on loopback,
// file storage under the run's data directory, every node routed to every
// other.
type benchCluster struct {
	srvs []*server.Server
}

func startCluster(dir string, n int) (*benchCluster, error) {
	c := &benchCluster{}
	name := fmt.Sprintf("bench%d", time.Now().UnixNano()%100000)
	// JetStream clustering wants configured routes on every node: reserve
	// the cluster ports first.
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	for i := 0; i < n; i++ {
		var routes []*url.URL
		for j, p := range ports {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("b%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("cluster-n%d", i)),
			Cluster:    server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		}
		srv, err := server.NewServer(opts)
		if err != nil {
			c.shutdown()
			return nil, err
		}
		srv.Start()
		if !srv.ReadyForConnections(20 * time.Second) {
			srv.Shutdown()
			c.shutdown()
			return nil, fmt.Errorf("cluster node %d not ready", i)
		}
		c.srvs = append(c.srvs, srv)
	}
	return c, nil
}

func (c *benchCluster) url(i int) string { return c.srvs[i%len(c.srvs)].ClientURL() }

func (c *benchCluster) shutdown() {
	for _, s := range c.srvs {
		s.Shutdown()
	}
	for _, s := range c.srvs {
		s.WaitForShutdown()
	}
}

// openLogRetry opens a replicated log, retrying while the cluster's
// JetStream meta leader is being elected (up to a minute).
func openLogRetry(ctx context.Context, nc *nats.Conn, cfg jetstream.LogConfig) (*jetstream.Log, error) {
	return openRetry(ctx, func(ctx context.Context) (*jetstream.Log, error) { return jetstream.OpenLog(ctx, nc, cfg) })
}

// openRetry calls open until it succeeds, for up to a minute while the
// cluster's JetStream meta leader is being elected; a store laid out
// otherwise (jetstream.ErrLayout) is an answer, not asked again.
func openRetry[T any](ctx context.Context, open func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var v T
	every := logport.Backoff{First: 250 * time.Millisecond, Max: 250 * time.Millisecond}
	notLayout := func(err error) bool { return !errors.Is(err, jetstream.ErrLayout) }
	err := jetstream.Retry(ctx, every, notLayout, func(ctx context.Context) error {
		// Each attempt has its own deadline: a request sent before the
		// meta leader is known may get no answer at all.
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		v, err = open(actx)
		return err
	})
	return v, err
}

// clusterEngine is one engine process on the cluster: its connection
// (to one node), log, projection and service.
type clusterEngine struct {
	nc   *nats.Conn
	log  *jetstream.Log
	proj *projection.Projection
	eng  *service.Engine
	stop func()
}

func (e *clusterEngine) close() {
	if e.stop != nil {
		e.stop()
	}
	e.nc.Close()
}

// scaleOut: 1, 2 and 3 engines, each connected to its own node of a
// 3-node cluster (3 replicas), each with 32 goroutines appending to disjoint
// sessions; engine 0 also runs the projection (one per stream), the others
// are writers (serve --no-projection). Raw: as many connections, one per
// node, with as many goroutines doing the fair raw async publish. Then the
// 3 engines through 3 partitioned streams, each led by another node,
// against the same engines on the one stream (partitionLine).
func (h *harness) scaleOut(ctx context.Context) error {
	const nodes = 3
	start := time.Now()
	cl, err := startCluster(h.dir, nodes)
	if err != nil {
		return err
	}
	defer cl.shutdown()
	perEngineClients := max(1, h.cfg.Clients/2)
	s := &scaleRun{h: h, perEngineClients: perEngineClients, per: max(1, h.cfg.ConcurrentOps/4/perEngineClients)}
	defer s.close()
	if err := s.connectRaw(ctx, cl, nodes); err != nil {
		return err
	}
	if err := s.startEngines(ctx, cl, nodes); err != nil {
		return err
	}
	// The same topology for both sides: every stream's leader on node 0.
	e0 := s.engines[0]
	for _, stream := range []string{e0.log.StreamName(), jetstream.EventStreamName(prefixRaw), "KV_" + e0.proj.Views().Bucket()} {
		if err := leaderOn(ctx, e0.nc, stream, "b0"); err != nil {
			return err
		}
	}
	h.progress("scale-out: 3-node cluster (3 replicas) formed, streams created, leaders on node 0 in %.1f s", time.Since(start).Seconds())
	for k := 1; k <= nodes; k++ {
		if err := s.line(ctx, k); err != nil {
			return err
		}
	}
	return s.partitionLine(ctx)
}

// scaleRun is the state the scale-out lines share: the raw side's
// connections, one per node, and the engines, one per node.
type scaleRun struct {
	h                *harness
	perEngineClients int     // goroutines per engine (and per raw connection)
	per              int     // appends per goroutine and run
	first            float64 // the 1-engine figure

	rawNC     []*nats.Conn
	rawJS     []njs.JetStream
	rawStream []njs.Stream
	engines   []*clusterEngine
}

// close closes the engines, then the raw connections.
func (s *scaleRun) close() {
	for _, e := range s.engines {
		e.close()
	}
	for _, nc := range slices.Backward(s.rawNC) {
		nc.Close()
	}
}

// connectRaw connects the raw side, one connection per node, and makes
// the raw stream with 3 replicas.
func (s *scaleRun) connectRaw(ctx context.Context, cl *benchCluster, nodes int) error {
	for i := 0; i < nodes; i++ {
		nc, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: cl.url(i), Name: fmt.Sprintf("bench-raw-%d", i)})
		if err != nil {
			return err
		}
		s.rawNC = append(s.rawNC, nc)
		if i == 0 {
			if _, err := openLogRetry(ctx, nc, jetstream.LogConfig{Prefix: prefixRaw, Replicas: 3}); err != nil {
				return fmt.Errorf("raw stream on the cluster: %w", err)
			}
		}
		js, err := njs.New(nc)
		if err != nil {
			return err
		}
		s.rawJS = append(s.rawJS, js)
		st, err := js.Stream(ctx, jetstream.EventStreamName(prefixRaw))
		if err != nil {
			return err
		}
		s.rawStream = append(s.rawStream, st)
	}
	return nil
}

// startEngines starts one engine per node on the engine stream with 3
// replicas; engine 0 runs the projection.
func (s *scaleRun) startEngines(ctx context.Context, cl *benchCluster, nodes int) error {
	for i := 0; i < nodes; i++ {
		nc, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: cl.url(i), Name: fmt.Sprintf("bench-engine-%d", i)})
		if err != nil {
			return err
		}
		e := &clusterEngine{nc: nc}
		s.engines = append(s.engines, e)
		if e.log, err = openLogRetry(ctx, nc, jetstream.LogConfig{Prefix: prefixEngine, Replicas: 3}); err != nil {
			return fmt.Errorf("engine stream on the cluster: %w", err)
		}
		if e.proj, err = projection.Open(ctx, e.log, projection.Config{}); err != nil {
			return err
		}
		if i == 0 {
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan error, 1)
			p := e.proj
			go func() { done <- p.Run(rctx) }()
			e.stop = func() { cancel(); <-done }
		}
		e.eng = service.New(e.log, e.proj, resolver.Default(), service.Config{})
	}
	return nil
}

// line adds the line of k engines against k raw connections.
func (s *scaleRun) line(ctx context.Context, k int) error {
	n := k * s.perEngineClients
	total := n * s.per
	casRetries := 0
	l, err := s.h.pair(ctx, fmt.Sprintf(nameScaleOut, k), "events/s", true, s.engineSample(k, n), s.rawSample(k, n, &casRetries))
	if err != nil {
		return err
	}
	if k == 1 {
		s.first = l.Engine
	}
	scale := ""
	if k > 1 && s.first > 0 {
		scale = fmt.Sprintf("; %.2fx the 1-engine figure", l.Engine/s.first)
	}
	l.Note = fmt.Sprintf("in-process 3-node JetStream cluster, stream and views with 3 replicas, every leader on node 0 (all nodes share this machine's %d cores); %d engine(s) on node(s) %s, %d goroutines each on their own sessions, %d appends/run; engine 0 runs the projection, the others only write; raw = %d connection(s) on the same nodes, the fair raw async publish of the 64-session line, next on ack, the same event sent again after a CAS refusal of its own write (%d times over all runs: the replicated stream's leader answers 10164 while its previous write to the subject is still counted in flight)%s",
		cpuCount(), k, nodeList(k), s.perEngineClients, total, k, casRetries, scale)
	s.h.add(l)
	return nil
}

// engineSample is a run of n goroutines spread over k engines, each
// appending to its own session: events/s.
func (s *scaleRun) engineSample(k, n int) sample {
	return s.appendSample(fmt.Sprintf("scale%d-e", k), s.oneStream(k), n, nil)
}

// oneStream is the first k engines on the one stream.
func (s *scaleRun) oneStream(k int) []*service.Engine {
	engines := make([]*service.Engine, k)
	for i := range engines {
		engines[i] = s.engines[i].eng
	}
	return engines
}

// appendSample is a run of n goroutines spread over engines, each making
// s.per appends to its own session (named from prefix, the run and the
// goroutine) after a first one outside the timing: events/s. done, when
// set, is told each goroutine's session once its appends are in.
func (s *scaleRun) appendSample(prefix string, engines []*service.Engine, n int, done func(session string)) sample {
	return func(ctx context.Context, r int) (float64, error) {
		name := func(g int) string { return fmt.Sprintf("%s%03d-%03d", prefix, r, g) }
		eng := func(g int) *service.Engine { return engines[g%len(engines)] }
		el, err := gated(n, func(g int) error {
			_, err := eng(g).Apply(ctx, name(g), origin, nil, toggle(0))
			return err
		}, func(g int) error {
			for i := 1; i <= s.per; i++ {
				if _, err := eng(g).Apply(ctx, name(g), origin, nil, toggle(i)); err != nil {
					return err
				}
			}
			if done != nil {
				done(name(g))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return float64(n*s.per) / el.Seconds(), nil
	}
}

// rawSample is a run of n goroutines spread over k raw connections, each
// doing the fair raw async publish to its own session: events/s; it adds
// the writers' CAS retries to casRetries.
func (s *scaleRun) rawSample(k, n int, casRetries *int) sample {
	return func(ctx context.Context, r int) (float64, error) {
		ws := make([]*rawWriter, n)
		defer func() {
			for _, w := range ws {
				if w != nil {
					*casRetries += w.casRetries
				}
			}
		}()
		lasts := make([]uint64, n)
		el, err := gated(n, func(g int) error {
			ws[g] = newRawWriter(fmt.Sprintf("scale%d-r%03d-%03d", k, r, g))
			var err error
			lasts[g], err = ws[g].publishNext(ctx, s.rawJS[g%k], s.rawStream[g%k], 0, 0)
			return err
		}, func(g int) error {
			for i := 1; i <= s.per; i++ {
				last, err := ws[g].publishNext(ctx, s.rawJS[g%k], s.rawStream[g%k], i, lasts[g])
				if err != nil {
					return err
				}
				lasts[g] = last
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return float64(n*s.per) / el.Seconds(), nil
	}
}

func nodeList(k int) string {
	s := make([]string, k)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return strings.Join(s, ",")
}

// leaderOn moves a stream's leader to the named server (a stepdown with a
// preferred placement) and waits until it is there.
func leaderOn(ctx context.Context, nc *nats.Conn, stream, name string) error {
	js, err := njs.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := js.Stream(actx, stream)
		var leader string
		if err == nil {
			var info *njs.StreamInfo
			if info, err = st.Info(actx); err == nil && info.Cluster != nil {
				leader = info.Cluster.Leader
			}
		}
		if leader == name {
			cancel()
			return nil
		}
		if leader != "" {
			_, err = nc.RequestWithContext(actx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(`{"placement":{"preferred":"`+name+`"}}`))
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("stream %s: leader %q, not %s, after a minute (%v)", stream, leader, name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// gated runs n goroutines: each runs warm(g), then all wait at one gate
// and run loop(g) (skipped where warm failed). It returns the time from
// the gate opening to the last loop's end and the goroutines' errors.
func gated(n int, warm, loop func(g int) error) (time.Duration, error) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	errs := make([]error, n)
	for g := 0; g < n; g++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			errs[g] = warm(g)
			ready.Done()
			<-gate
			if errs[g] == nil {
				errs[g] = loop(g)
			}
		}()
	}
	ready.Wait()
	t := time.Now()
	close(gate)
	done.Wait()
	return time.Since(t), errors.Join(errs...)
}
