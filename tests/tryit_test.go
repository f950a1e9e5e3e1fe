package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The README's default addresses, which the Try-it block and the docs'
// blocks use as a reader's engine has them; the tests run their own
// engines on free ports and rewrite these.
const (
	readmeHTTP = "7420"
	readmeNATS = "4222"
)

// tryItBlock is the first shell block of the README's "## Try it"
// section.
func tryItBlock(t *testing.T) fencedBlock {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), "\n## Try it\n")
	if at < 0 {
		t.Fatal("README.md has no \"## Try it\" section")
	}
	start := strings.Count(string(data[:at+1]), "\n")
	for _, b := range fencedBlocks(t, "../README.md") {
		if b.start > start && b.runnable() {
			return b
		}
	}
	t.Fatal("README.md's Try it section has no ```sh block")
	return fencedBlock{}
}

// tryItDir is the directory the Try-it block runs in: the repository's
// top-level entries linked into a directory of its own, as a fresh clone
// looks, so that the block's build, ./engine-data and output files stay out
// of the working tree. The same repository gets the same directory, so the
// build cache serves the block's go build after the first run.
func tryItDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "engine-tryit-"+hex.EncodeToString(sum[:6]))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "engine", "engine-data", ".git":
			continue // what the block makes, and history it does not need
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// portRewriter rewrites the README's default ports in a command to the
// test engine's (the CLI itself follows ENGINE_HTTP and ENGINE_LISTEN).
func portRewriter(httpAddr, natsAddr string) func(string) string {
	_, httpPort, _ := strings.Cut(httpAddr, ":")
	_, natsPort, _ := strings.Cut(natsAddr, ":")
	r := strings.NewReplacer(
		"localhost:"+readmeHTTP, "localhost:"+httpPort, "127.0.0.1:"+readmeHTTP, "127.0.0.1:"+httpPort,
		"localhost:"+readmeNATS, "localhost:"+natsPort, "127.0.0.1:"+readmeNATS, "127.0.0.1:"+natsPort)
	return r.Replace
}

// clientEnv are the variables a reader's shell might hold that would
// point the block's commands elsewhere; the runs remove them.
var clientEnv = []string{"ENGINE_SERVER", "ENGINE_HTTP", "ENGINE_LISTEN", "ENGINE_DATA", "NATS_URL", "NATS_CONTEXT", "NATS_USER", "NATS_PASSWORD", "NATS_CREDS", "ENGINE_TOKEN"}

// TestReadmeTryIt runs the README's Try-it block top to bottom, one line
// at a time, in a directory of its own with its own ports (ENGINE_HTTP,
// ENGINE_LISTEN, which serve and the CLI read) and data directory, and
// fails on a line that exits otherwise than its comment says, or whose
// output lacks a `quoted` text of its comment.
func TestReadmeTryIt(t *testing.T) {
	block := tryItBlock(t)
	if len(block.lines) < 20 {
		t.Fatalf("the Try-it block has %d lines; want the whole walk-through", len(block.lines))
	}
	dir := tryItDir(t)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	sh := startShell(t, dir, []string{"ENGINE_HTTP=" + httpAddr, "ENGINE_LISTEN=" + natsAddr}, clientEnv, portRewriter(httpAddr, natsAddr))
	runBlock(t, "README.md", sh, block)
}

// runBlock runs every line of b in sh and checks each against its
// comment; it stops at the first line that fails, since the next lines
// build on it.
func runBlock(t *testing.T, file string, sh *shell, b fencedBlock) {
	t.Helper()
	for _, l := range b.lines {
		if l.cmd == "" {
			continue
		}
		timeout := time.Minute
		if strings.HasPrefix(l.cmd, "go build") {
			timeout = 5 * time.Minute // a cold build cache on a loaded machine
		}
		rc, out := sh.run(l, timeout)
		if bad := l.check(rc, out); len(bad) > 0 {
			t.Fatalf("%s:%d: %s\n  %s\noutput:\n%s", file, l.n, l.text, strings.Join(bad, "\n  "), clipOutput(out))
		}
		t.Logf("%s:%d: exit %d, %d claims hold: %s", file, l.n, rc, len(l.claims), l.cmd)
	}
}
