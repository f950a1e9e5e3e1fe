package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPages are the README and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

// prose is a page without its fenced blocks (example replies carry
// times, which are data, not history).
func prose(page string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// The README and docs/ say what the engine is and does, in the present
// tense: no issue numbers, no requirement ids of a document outside the
// repository, no dated narrative ("before 2026-12-04 ...", "(before: ...)").
// The history of a change is in the git log.
func TestDocsCarryNoHistory(t *testing.T) {
	patterns := []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`#[0-9]{2}\b`), "an issue number"},
		{regexp.MustCompile(`\b[Ii]ssue [0-9]+`), "an issue number"},
		{regexp.MustCompile(`\bR[0-9]{1,2}\b`), "a requirement id"},
		{regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`), "a date"},
		{regexp.MustCompile(`\((before|was)[ :]`), "a before/after narrative"},
		{regexp.MustCompile(`\bbefore #|\bsince #`), "a before/after narrative"},
	}
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		generated := filepath.Base(page) == "performance.md" // its date is the run's
		for i, line := range strings.Split(prose(string(data)), "\n") {
			for _, p := range patterns {
				if generated && p.what == "a date" {
					continue
				}
				if m := p.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s (%q): say what the engine does; the history belongs in the git log:\n%s", page, i+1, p.what, m, line)
				}
			}
		}
	}
}

// Every relative link of the README and docs/ names a file of the
// repository and, with a #fragment, a heading of that page.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	heading := regexp.MustCompile(`(?m)^#+ (.+)$`)
	anchorOf := func(h string) string {
		a := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))
		return regexp.MustCompile(`[^a-z0-9_-]`).ReplaceAllString(a, "")
	}
	n := 0
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, frag := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
			}
			body, err := os.ReadFile(file)
			if err != nil {
				if _, serr := os.Stat(file); serr == nil {
					continue // a directory
				}
				t.Errorf("%s links %s, which does not exist", page, m[0])
				continue
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			found := false
			for _, h := range heading.FindAllStringSubmatch(string(body), -1) {
				if anchorOf(h[1]) == frag {
					found = true
				}
			}
			if !found {
				t.Errorf("%s links %s: %s has no heading #%s", page, m[0], file, frag)
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d relative links checked", n)
	}
}

// The README is the front door: at most 250 lines.
func TestReadmeShort(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 250 {
		t.Fatalf("README.md has %d lines; keep it under 250 and move the rest to docs/", n)
	}
}
