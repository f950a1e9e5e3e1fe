package tests

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// The batched direct-get reply format docs/wire-format.md
// describes is what the server sends: one message per event with its
// publish headers and the Nats-* ones, an empty 204 EOB message after a
// batch, and a 404 past the end.
func TestWireFormatDirectGetBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		ev := events.New("s1", "web", "alice", events.ToolDisabled{Name: "tool" + strconv.Itoa(i)})
		ids = append(ids, ev.ID)
		if _, err := log.Append(ctx, "s1", uint64(i), ev); err != nil {
			t.Fatal(err)
		}
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req string) {
		if err := nc.PublishRequest("$JS.API.DIRECT.GET.TOOLS_EVENTS", inbox, []byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	ask(`{"seq":1,"next_by_subj":"tools.events.s1","batch":2}`)
	for i := range 2 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := events.Decode(m.Data); err != nil {
			t.Fatalf("message %d: body is not the event: %v", i, err)
		}
		for h, want := range map[string]string{"Nats-Msg-Id": ids[i], "Nats-Stream": "TOOLS_EVENTS", "Nats-Subject": "tools.events.s1", "Nats-Sequence": strconv.Itoa(i + 1)} {
			if got := m.Header.Get(h); got != want {
				t.Errorf("message %d: header %s = %q, want %q", i, h, got, want)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp")); err != nil {
			t.Errorf("message %d: Nats-Time-Stamp: %v", i, err)
		}
		if m.Header.Get("Nats-Num-Pending") == "" {
			t.Errorf("message %d: no Nats-Num-Pending header: %v", i, m.Header)
		}
	}
	eob, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(eob.Data) != 0 || eob.Header.Get("Status") != "204" || eob.Header.Get("Description") != "EOB" {
		t.Fatalf("end of batch: status %q description %q body %q", eob.Header.Get("Status"), eob.Header.Get("Description"), eob.Data)
	}
	ask(`{"seq":4,"next_by_subj":"tools.events.s1","batch":2}`)
	end, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(end.Data) != 0 || end.Header.Get("Status") != "404" {
		t.Fatalf("past the end: status %q body %q", end.Header.Get("Status"), end.Data)
	}
}

// The pages a foreign client reads (docs/*.md) and the vector
// files carry no Go identifiers and no requirement numbers of a file
// outside the repository.
func TestDocsHaveNoGoIdentifiers(t *testing.T) {
	goNames := map[string]bool{}
	camel := regexp.MustCompile(`^[A-Z][a-z0-9]+[A-Z]`)
	for _, dir := range []string{"../events", "../jetstream", "../api", "../resolver", "../service"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, fn := range files {
			if strings.HasSuffix(fn, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, fn, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The package-level names: types, constants, variables and
			// functions (methods are not names a sentence would use alone).
			for _, name := range topLevelNames(f) {
				// Only names no English sentence uses: camel case
				// (LogConfig, DecodeError) or Err-prefixed sentinels.
				if ast.IsExported(name) && camel.MatchString(name) {
					goNames[name] = true
				}
			}
		}
	}
	for _, typ := range events.Types() { // event types are wire names too
		delete(goNames, string(typ))
	}
	files := []string{"../docs/wire-format.md", "../docs/semantics.md"}
	vectors, _ := filepath.Glob("../events/testdata/vectors/*.json")
	files = append(files, vectors...)
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	rnum := regexp.MustCompile(`\bR[0-9]{1,2}\b`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, w := range word.FindAllString(line, -1) {
				if goNames[w] {
					t.Errorf("%s:%d: Go identifier %q: %s", f, i+1, w, line)
				}
			}
			if m := rnum.FindString(line); m != "" {
				t.Errorf("%s:%d: requirement number %s of a file outside the repository: link docs/semantics.md instead", f, i+1, m)
			}
		}
	}
}

// Every link to a section of docs/semantics.md (in help
// texts, errors, the README and the docs) names a heading of that page.
func TestSemanticsLinksResolve(t *testing.T) {
	page, err := os.ReadFile("../docs/semantics.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(page), -1) {
		a := strings.ToLower(strings.ReplaceAll(m[1], " ", "-"))
		anchors[regexp.MustCompile(`[^a-z0-9_-]`).ReplaceAllString(a, "")] = true
	}
	link := regexp.MustCompile(`semantics\.md#([a-z0-9_-]+)`)
	var files []string
	for _, pat := range []string{"../*.md", "../docs/*.md", "../*/*.go", "../*/*/*.go", "../inspector/static/*"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			n++
			if !anchors[m[1]] {
				t.Errorf("%s links docs/semantics.md#%s, which is no heading there", f, m[1])
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d links to docs/semantics.md sections found", n)
	}
}

// topLevelNames lists the names f declares at package level: types,
// constants, variables and functions without a receiver.
func topLevelNames(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					out = append(out, sp.Name.Name)
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
