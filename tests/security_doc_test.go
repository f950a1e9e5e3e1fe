package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every item of docs/security.md names the tests that check it, and each
// named test exists in the repository.
func TestSecurityDocNamesTests(t *testing.T) {
	data, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)
	// Every test and fuzz function of the repository.
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\b(?:Test|Fuzz)[A-Z][A-Za-z0-9_]*`)
	items := strings.Split(section, "\n- ")[1:]
	if len(items) < 10 {
		t.Fatalf("docs/security.md has %d items, want one per statement", len(items))
	}
	for _, item := range items {
		if i := strings.Index(item, "\n\n"); i >= 0 {
			item = item[:i]
		}
		tests := named.FindAllString(item, -1)
		if len(tests) == 0 {
			t.Errorf("Security item names no test: %q", item)
		}
		for _, name := range tests {
			if !defined[name] {
				t.Errorf("Security item names %s, which no test file defines: %q", name, item)
			}
		}
	}
}
