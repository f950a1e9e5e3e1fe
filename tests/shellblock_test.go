package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The command blocks of the README and docs/ are run as a reader would
// run them: line by line in one shell, so that a server started with &
// and a cd carry over to the next line. A line's comment states what it
// does; the test holds the line to it: the line exits 0 (or N, when the
// comment says "exits N"), and each `quoted` text of the comment is in
// the line's output (stdout and stderr, runs of blanks read as one).

// blockLine is one command line of a block with its comment.
type blockLine struct {
	n       int    // line number in the file
	text    string // the whole line as written
	cmd     string // the command, without its comment
	claims  []string
	wantRC  int
	comment string
}

var (
	commentRe = regexp.MustCompile(`^(.*?\S)\s+#\s+(.*)$`)
	claimRe   = regexp.MustCompile("`([^`]+)`")
	exitsRe   = regexp.MustCompile(`\bexits (\d+)\b`)
	blankRe   = regexp.MustCompile(`[ \t]+`)
)

// parseBlockLine splits a line into its command and its comment's claims.
func parseBlockLine(n int, line string) blockLine {
	l := blockLine{n: n, text: line, cmd: strings.TrimSpace(line)}
	if strings.HasPrefix(l.cmd, "#") { // a comment line: nothing to run
		l.cmd = ""
		return l
	}
	if m := commentRe.FindStringSubmatch(line); m != nil {
		l.cmd, l.comment = strings.TrimSpace(m[1]), m[2]
		for _, c := range claimRe.FindAllStringSubmatch(l.comment, -1) {
			l.claims = append(l.claims, blankRe.ReplaceAllString(c[1], " "))
		}
		if e := exitsRe.FindStringSubmatch(l.comment); e != nil {
			l.wantRC, _ = strconv.Atoi(e[1])
		}
	}
	return l
}

// fencedBlock is a fenced code block of a Markdown file.
type fencedBlock struct {
	info  string // the fence's info string ("sh", "sh norun", "")
	start int    // line number of the opening fence
	lines []blockLine
}

// fencedBlocks reads the fenced code blocks of a Markdown page.
func fencedBlocks(t *testing.T, path string) []fencedBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fencedBlock
	var cur *fencedBlock
	cont, contAt := "", 0 // a command continued with a trailing backslash
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &fencedBlock{info: strings.TrimSpace(strings.TrimPrefix(line, "```")), start: i + 1}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur == nil || strings.TrimSpace(line) == "" {
			continue
		}
		if cont == "" {
			contAt = i + 1
		}
		if before, ok := strings.CutSuffix(line, "\\"); ok {
			cont += before + " "
			continue
		}
		cur.lines = append(cur.lines, parseBlockLine(contAt, cont+line))
		cont = ""
	}
	if cur != nil {
		t.Fatalf("%s: the block opened at line %d is never closed", path, cur.start)
	}
	return out
}

// runnable reports whether a block is meant to be run: a shell block
// (```sh or ```bash) without the "norun" mark.
func (b fencedBlock) runnable() bool {
	f := strings.Fields(b.info)
	return len(f) == 1 && (f[0] == "sh" || f[0] == "bash")
}

// shell is one bash process that runs lines in dir, as a terminal would.
type shell struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	marks   chan string
	dir     string
	n       int
	rewrite func(string) string
}

// startShell starts bash in dir with env added to the test's environment
// (variables named in unset removed first). rewrite, when set, rewrites
// each command before it runs (the block's default ports to the test's).
func startShell(t *testing.T, dir string, env, unset []string, rewrite func(string) string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group: the test can end all it started
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, u := range unset {
			if name == u {
				keep = false
			}
		}
		if keep {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bash: %v", err)
	}
	s := &shell{t: t, cmd: cmd, in: in, marks: make(chan string, 16), dir: dir, rewrite: rewrite}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.marks <- sc.Text()
		}
		close(s.marks)
	}()
	t.Cleanup(func() {
		_ = in.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the shell and every process it started
		_ = cmd.Wait()
	})
	return s
}

// run runs one line and returns its exit status and its output (stdout
// then stderr); a line ending in & runs in the background (status 0, its
// output in files of the shell's directory).
func (s *shell) run(l blockLine, timeout time.Duration) (int, string) {
	s.t.Helper()
	s.n++
	cmd := l.cmd
	if s.rewrite != nil {
		cmd = s.rewrite(cmd)
	}
	out := filepath.Join(s.dir, fmt.Sprintf(".line%d.out", s.n))
	errf := filepath.Join(s.dir, fmt.Sprintf(".line%d.err", s.n))
	var script string
	if bg, ok := strings.CutSuffix(cmd, "&"); ok && !strings.HasSuffix(bg, "&") {
		script = fmt.Sprintf("%s >%q 2>%q </dev/null &\necho \"__line_done__ %d 0\"\n", strings.TrimSpace(bg), out, errf, s.n)
	} else {
		script = fmt.Sprintf("{ %s\n} >%q 2>%q </dev/null\necho \"__line_done__ %d $?\"\n", cmd, out, errf, s.n)
	}
	if _, err := io.WriteString(s.in, script); err != nil {
		s.t.Fatalf("line %d: write to bash: %v", l.n, err)
	}
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-s.marks:
			if !ok {
				s.t.Fatalf("line %d: bash ended while running %q", l.n, l.cmd)
			}
			f := strings.Fields(m)
			if len(f) != 3 || f[0] != "__line_done__" || f[1] != strconv.Itoa(s.n) {
				continue
			}
			rc, _ := strconv.Atoi(f[2])
			o, _ := os.ReadFile(out)
			e, _ := os.ReadFile(errf)
			return rc, string(o) + string(e)
		case <-deadline:
			s.t.Fatalf("line %d: %q did not end within %s", l.n, l.cmd, timeout)
		}
	}
}

// check holds a line's result to its comment; it reports what is wrong.
func (l blockLine) check(rc int, output string) []string {
	var bad []string
	if rc != l.wantRC {
		bad = append(bad, fmt.Sprintf("exit status %d, want %d", rc, l.wantRC))
	}
	flat := blankRe.ReplaceAllString(output, " ")
	for _, c := range l.claims {
		if !strings.Contains(flat, c) {
			bad = append(bad, fmt.Sprintf("the comment says %q, which the output does not show", c))
		}
	}
	return bad
}

// freeAddr is a loopback host:port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// clipOutput keeps the start and the end of a long output for a failure
// message.
func clipOutput(s string) string {
	if len(s) <= 3000 {
		return s
	}
	return s[:1500] + "\n[...]\n" + s[len(s)-1500:]
}
