package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// blocksRunElsewhere are the pages whose blocks another suite runs, with
// that suite.
var blocksRunElsewhere = map[string]string{
	"python.md": "clients/python/tests (test_docs.py runs every curl and Python block against an engine of its own, test_install the pip line)",
}

// TestDocsCommandBlocksRun runs every shell block of docs/*.md that is
// meant to be run (```sh or ```bash; a block marked ```sh norun shows
// commands that are not, such as a server in the foreground) against a
// fresh engine per page, line by line, as TestReadmeTryIt runs the README:
// each line exits as its comment says and shows its comment's `quoted`
// texts. The blocks use the README's default ports; the test rewrites
// them to its engine's.
func TestDocsCommandBlocksRun(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, page := range pages {
		if by, ok := blocksRunElsewhere[filepath.Base(page)]; ok {
			t.Logf("%s: its blocks are run by %s", page, by)
			continue
		}
		var blocks []fencedBlock
		for _, b := range fencedBlocks(t, page) {
			if b.runnable() {
				blocks = append(blocks, b)
			} else if f := strings.Fields(b.info); len(f) > 0 && (f[0] == "sh" || f[0] == "bash") && (len(f) != 2 || f[1] != "norun") {
				t.Errorf("%s:%d: fence info %q: a shell block is ```sh (run by this test) or ```sh norun", page, b.start, b.info)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		ran += len(blocks)
		t.Run(filepath.Base(page), func(t *testing.T) {
			p := startEngine(t, t.TempDir())
			httpAddr := strings.TrimPrefix(p.HTTPURL, "http://")
			natsAddr := strings.TrimPrefix(p.NATSURL, "nats://")
			dir := t.TempDir()
			root, _ := filepath.Abs("..")
			for _, name := range []string{"examples", "resolver", "toolsearch", "deploy"} {
				if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(engineBin, filepath.Join(dir, "engine")); err != nil {
				t.Fatal(err)
			}
			env := []string{"ENGINE_HTTP=" + httpAddr, "ENGINE_LISTEN=" + natsAddr, "ENGINE_DATA=" + p.DataDir, "PATH=" + dir + ":" + os.Getenv("PATH")}
			sh := startShell(t, dir, env, clientEnv, portRewriter(httpAddr, natsAddr))
			for _, b := range blocks {
				runBlock(t, filepath.Base(page), sh, b)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no runnable shell block in docs/*.md: the test would check nothing")
	}
}
