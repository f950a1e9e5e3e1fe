package tests

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/toolintent/engine"

// architectureDoc is the page that holds the package table.
const architectureDoc = "docs/architecture.md"

// importTable reads the package table of docs/architecture.md (its
// "## Packages" section): for each package row (`pkg/`), the project
// packages the row says it imports ("—" for none).
func importTable(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", architectureDoc))
	if err != nil {
		t.Fatalf("open %s: %v", architectureDoc, err)
	}
	defer f.Close()
	table := map[string][]string{}
	inArch := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inArch = line == "## Packages"
			continue
		}
		if !inArch || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("%s row %q: want three cells (package, holds, imports)", architectureDoc, line)
		}
		pkg := strings.TrimSuffix(strings.Trim(strings.TrimSpace(cells[0]), "`"), "/")
		var imports []string
		for _, name := range strings.Split(cells[len(cells)-1], ",") {
			name = strings.TrimSpace(name)
			if name == "" || name == "—" {
				continue
			}
			imports = append(imports, name)
		}
		slices.Sort(imports)
		if _, dup := table[pkg]; dup {
			t.Fatalf("%s lists %s twice", architectureDoc, pkg)
		}
		table[pkg] = imports
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", architectureDoc, err)
	}
	if len(table) == 0 {
		t.Fatalf("%s has no \"## Packages\" table", architectureDoc)
	}
	return table
}

// projectImports lists each non-test package of the module with the project
// packages it imports directly (test files are not counted: tests may reach
// across layers, the code may not).
func projectImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], modulePath+"/")
		if !ok {
			continue // the module root has no package
		}
		var imports []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				imports = append(imports, rel)
			}
		}
		slices.Sort(imports)
		got[pkg] = imports
	}
	return got
}

// TestArchitectureImportTableIsTrue keeps the package table of
// docs/architecture.md exact: every package of the module has a row, every
// row names a package, and the imports column lists exactly the project
// packages the package's code imports (dependencies point one way, and the
// table says which).
func TestArchitectureImportTableIsTrue(t *testing.T) {
	table := importTable(t)
	actual := projectImports(t)
	for _, pkg := range slices.Sorted(maps.Keys(actual)) {
		imports := actual[pkg]
		want, ok := table[pkg]
		if !ok {
			t.Errorf("package %s is missing from %s; add a row `%s/` | what it holds | %s", pkg, architectureDoc, pkg, strings.Join(imports, ", "))
			continue
		}
		if !slices.Equal(want, imports) {
			t.Errorf("%s says %s imports [%s]; its code imports [%s]: fix the row (or the import)", architectureDoc, pkg, strings.Join(want, ", "), strings.Join(imports, ", "))
		}
	}
	for pkg := range table {
		if pkg == "tests" {
			continue // tests/ holds only test files
		}
		if _, ok := actual[pkg]; !ok {
			t.Errorf("%s lists %s/, which is not a package of the module", architectureDoc, pkg)
		}
	}
}

// TestClientDependenciesAsDocumented keeps client/doc.go's claim true:
// beside the standard library the Go client links nats.go (with the
// modules nats.go itself needs), goccy/go-json and the engine's wire,
// intent and internal/clip packages, nothing else of the engine.
func TestClientDependenciesAsDocumented(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{.Module.Path}} {{.ImportPath}}{{end}}", "./client")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./client: %v", err)
	}
	allowed := map[string]bool{
		"github.com/nats-io/nats.go": true, "github.com/nats-io/nkeys": true, "github.com/nats-io/nuid": true,
		"github.com/klauspost/compress": true, "golang.org/x/crypto": true, "golang.org/x/sys": true, // nats.go's own
		"github.com/goccy/go-json": true,
	}
	engine := map[string]bool{modulePath + "/client": true, modulePath + "/wire": true, modulePath + "/intent": true, modulePath + "/internal/clip": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod, pkg, _ := strings.Cut(line, " ")
		switch {
		case mod == modulePath && !engine[pkg]:
			t.Errorf("client links the engine package %s; client/doc.go says it links only wire, intent and internal/clip", pkg)
		case mod != modulePath && !allowed[mod]:
			t.Errorf("client links %s (module %s), which client/doc.go does not name", pkg, mod)
		}
	}
}
