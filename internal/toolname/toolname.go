// Package toolname holds the one rule for tool (and preset) names, shared
// by the registry loader and the event decoder so they cannot disagree.
//
// The rule is what both providers the engine renders for accept: the
// Anthropic Messages API takes ^[a-zA-Z0-9_-]{1,128}$ for tool names but
// 64 characters in a tool_reference, and the OpenAI Responses API takes
// ^[a-zA-Z0-9_-]{1,64}$. So names may carry the case and separators MCP
// servers use (mcp__github__create_issue, createJiraIssue,
// API-post-search), up to 64 bytes, starting with a letter. Dots and
// slashes, which the MCP specification allows, are accepted by neither
// provider; `engine registry import` rewrites them to '_' and says so.
package toolname

// Pattern is the rule Valid checks, for error messages.
const Pattern = "^[A-Za-z][A-Za-z0-9_-]{0,63}$"

// MaxLen is the longest valid name, in bytes.
const MaxLen = 64

// Valid reports whether s matches Pattern.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || !letter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !NameByte(s[i]) {
			return false
		}
	}
	return true
}

// NameByte reports whether c may appear in a name after its first byte.
func NameByte(c byte) bool {
	return letter(c) || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// PatternRule describes the name patterns ValidPattern accepts, for error
// messages.
const PatternRule = "a tool name, or a glob of letters, digits, '_', '-' and the wildcards '*' and '?' (at most 64 bytes), such as mcp__github__*"

// ValidPattern reports whether s is a valid name or a valid name pattern:
// at most MaxLen bytes of name bytes and the wildcards '*' (any run) and
// '?' (any one byte), starting with a letter or a wildcard. A pattern
// stands for every tool name it matches (disabled, picked and allowed
// lists take them).
func ValidPattern(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	if !letter(s[0]) && s[0] != '*' && s[0] != '?' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !NameByte(s[i]) && s[i] != '*' && s[i] != '?' {
			return false
		}
	}
	return true
}
