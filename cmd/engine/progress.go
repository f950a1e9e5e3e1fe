package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// progress prints a one-line, self-overwriting status on a terminal and
// nothing otherwise (pipes, files, CI logs stay clean). Safe for concurrent
// use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	last  time.Time
	start time.Time
}

// newProgress reports on stderr when it is a terminal.
func newProgress() *progress {
	return &progress{w: os.Stderr, tty: isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd()), start: time.Now()}
}

// Update shows a status line, at most ten times a second.
func (p *progress) Update(format string, args ...any) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// Done ends the status line with a final message (printed on a terminal
// only).
func (p *progress) Done(format string, args ...any) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K"+format+"\n", args...)
}

// Writer returns an io.Writer for line-oriented progress from packages that
// take one (nil when not on a terminal, which those packages treat as quiet).
func (p *progress) Writer() io.Writer {
	if !p.tty {
		return nil
	}
	return p.w
}
