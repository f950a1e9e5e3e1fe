package natstest

// link is the TCP proxy in front of each cluster route, which partitions
// and heals a node.

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// link is a TCP proxy carrying the route connections one node dials to
// another.
type link struct {
	ln net.Listener

	mu      sync.Mutex
	target  string // "" until the target node has started
	cut     bool
	stalled bool // open connections carry nothing (Blackhole)
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func newLink() (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) setTarget(target string) {
	l.mu.Lock()
	l.target = target
	l.mu.Unlock()
}

// setCut cuts (closing every open connection) or restores the link.
func (l *link) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for c := range l.conns {
			_ = c.Close()
		}
	}
}

// setStalled stalls the link's open connections (what they carry is
// dropped) or ends a stall by closing them, as their streams lost bytes.
func (l *link) setStalled(stalled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stalled && !stalled {
		for c := range l.conns {
			_ = c.Close()
		}
	}
	l.stalled = stalled
}

func (l *link) isStalled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stalled
}

// copy forwards src to dst until either fails, dropping what arrives
// while the link is stalled.
func (l *link) copy(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.isStalled() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}

// track registers c unless the link is cut, closed or has no target.
func (l *link) track(c net.Conn) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut || l.closed || l.target == "" {
		return "", false
	}
	l.conns[c] = struct{}{}
	return l.target, true
}

func (l *link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	for _, c := range cs {
		delete(l.conns, c)
		_ = c.Close()
	}
	l.mu.Unlock()
}

func (l *link) serve() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		target, ok := l.track(down)
		if !ok {
			_ = down.Close()
			continue
		}
		l.wg.Add(1)
		go l.pipe(down, target)
	}
}

func (l *link) pipe(down net.Conn, target string) {
	defer l.wg.Done()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		l.untrack(down)
		return
	}
	if _, ok := l.track(up); !ok {
		l.untrack(down, up)
		return
	}
	done := make(chan struct{}, 2)
	go func() { l.copy(up, down); done <- struct{}{} }()
	go func() { l.copy(down, up); done <- struct{}{} }()
	<-done
	l.untrack(down, up) // unblocks the other copy
	<-done
}

// refusingAddr returns a loopback address on which connections are
// refused, and a func that releases it: a TCP socket bound to a port and
// never put to listen, so no one else can take the port meanwhile.
func refusingAddr() (string, func(), error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: unexpected address %T", sa)
	}
	var once sync.Once
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port)), func() { once.Do(func() { _ = syscall.Close(fd) }) }, nil
}
