package embedding

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// DefaultMaxText is the default bound of a tool's text, in runes: about
// 500 tokens, within every common embedding model's context.
const DefaultMaxText = 2000

// textVersion names the way Text writes a tool: it is part of every
// cache key, so that vectors of another text are never reused.
const textVersion = "t1"

// Text is what the engine embeds for a tool: its name with its parts
// apart ("mcp__github__create_issue" → "github create issue"), its
// description, then its parameters' names and descriptions, cut to at
// most maxRunes runes (on a word boundary where one is near). Every part
// is in the tool's contract (resolver.ToolHash), so a tool with the same
// hash has the same text.
func Text(t resolver.Tool, maxRunes int) string {
	var b strings.Builder
	b.WriteString(readableName(t.Name))
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(": ")
		b.WriteString(d)
	}
	names, texts := toolsearch.SchemaText(t.Parameters)
	if len(names) > 0 {
		b.WriteString("\nParameters: ")
		b.WriteString(strings.Join(names, ", "))
		b.WriteString(".")
	}
	for _, x := range texts {
		if x = strings.TrimSpace(x); x != "" {
			b.WriteString(" ")
			b.WriteString(x)
		}
	}
	return cut(strings.ToValidUTF8(b.String(), "\ufffd"), maxRunes)
}

// readableName splits a tool name into words: the mcp__ prefix dropped,
// '_', '-', '.' and case changes ("createIssue") as spaces.
func readableName(name string) string {
	name = strings.TrimPrefix(name, resolver.MCPPrefix)
	var b strings.Builder
	prev := rune(0)
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			r = ' '
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		}
		if r == ' ' && (prev == ' ' || b.Len() == 0) {
			prev = r
			continue
		}
		b.WriteRune(unicode.ToLower(r))
		prev = r
	}
	return strings.TrimSpace(b.String())
}

// cut returns s of at most n runes, cut after the last space of its last
// tenth when there is one.
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	end := 0
	for i := range s {
		if n == 0 {
			end = i
			break
		}
		n--
	}
	if sp := strings.LastIndexByte(s[:end], ' '); sp > end*9/10 {
		end = sp
	}
	return s[:end]
}
