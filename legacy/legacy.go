// Package legacy imports sessions of a backend that stored a materialized
// tool list (the seed's original failure, §1.2–§1.3: a session saved with
// the whole default list when web_search was on, or a preset expanded into
// its names) as the intent that reproduces them.
//
// Parse reads a file of legacy session configs; Plan decides, per session,
// the shortest intent whose expansion is the stored list against the lists
// of the time it was saved: the defaults ({enabled: true}), a preset, the
// defaults or a preset minus a few disabled names, or a short picked list,
// with the web_search overlay where the list had web_search and the base
// lacks it. Every decision is checked by folding its events through
// aggregate.Decide (so the materialization guard holds) and resolving
// the result against the live registry; the report says what the session
// gains or loses today.
//
// The package is pure: it reads and writes no log. Writing the events is
// the caller's (engine import --apply sends them through the API, where
// every guard applies again).
package legacy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/clip"
)

// ErrInvalidFile means a legacy file cannot be read; the error names the
// value and the fix.
var ErrInvalidFile = errors.New("invalid legacy file")

// MaxFileBytes bounds a legacy file (decoders are bounded).
const MaxFileBytes = 64 << 20

// MaxSessions bounds the sessions of one file.
const MaxSessions = 1_000_000

// Session is one legacy session config.
type Session struct {
	// Session is the session id.
	Session string
	// Tools is the stored tool list, in the order stored: the names of a
	// list, or the names a dict mapped to true. Nil when the session
	// stored no list (Kind ToolsNone or ToolsBool).
	Tools []string
	// Off lists the names a dict mapped to false. A dict is opencode's
	// form: it changes the defaults of its time, so a name it does not
	// mention follows them ({"bash": false} is every default tool but
	// bash).
	Off []string
	// Kind says which form the session stored.
	Kind ToolsKind
	// Enabled is the stored boolean for Kind ToolsBool.
	Enabled bool
	// WebSearch is the session's web_search flag; nil when absent.
	WebSearch *bool
	// Defaults, when not nil, is DEFAULT_TOOLS at the time this session
	// was saved (overrides File.Defaults).
	Defaults []string
}

// ToolsKind is the form of a stored tools value.
type ToolsKind uint8

// The forms a legacy session stores its tools in.
const (
	// ToolsNone: no value (null or absent): the session followed its
	// profile.
	ToolsNone ToolsKind = iota
	// ToolsBool: true (all on) or false (all off).
	ToolsBool
	// ToolsList: a JSON array of names.
	ToolsList
	// ToolsDict: a JSON object of name to true (on) or false (off).
	ToolsDict
)

// File is a parsed legacy file.
type File struct {
	// Defaults is DEFAULT_TOOLS at the time the sessions were saved; nil
	// means the live registry's defaults.
	Defaults []string
	// Presets are the presets' lists at that time, by name; a preset not
	// listed is compared with the live registry's list.
	Presets map[string][]string
	// Sessions in file order.
	Sessions []Session
}

// Parse reads a legacy file. Two shapes are accepted:
//
//	[{"session": "s1", "tools": ["read_file", "grep"], "web_search": true}, ...]
//	{"defaults": [...], "presets": {"research": [...]}, "sessions": [...]}
//
// "tools" is a list of names, a dict of name to true/false (opencode's
// form: the defaults of the time with the names mapped to true added, in
// the order written, and the names mapped to false taken out; a name not
// mentioned follows the defaults), true / false (all on / all off), or null / absent
// (the session followed its profile). "web_search" is optional; "defaults"
// (per session, or for the file) is DEFAULT_TOOLS at the time the session
// was saved, and "presets" the presets' lists then; without them the live
// registry's lists are the reference. Unknown keys, duplicate keys, names
// that are not strings and values of the wrong type are errors wrapping
// ErrInvalidFile that name the session and the key; tool names are checked
// by Plan (an unknown or malformed name is reported, not fatal).
func Parse(data []byte) (File, error) {
	if len(data) > MaxFileBytes {
		return File{}, fmt.Errorf("%w: %d bytes, at most %d: split the file", ErrInvalidFile, len(data), MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return File{}, fmt.Errorf("%w: %v: want a JSON array of sessions or an object with \"sessions\"", ErrInvalidFile, err)
	}
	var f File
	switch tok {
	case json.Delim('['):
		if f.Sessions, err = sessions(dec, "sessions"); err != nil {
			return File{}, err
		}
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			key, err := objectKey(dec, "the file", seen)
			if err != nil {
				return File{}, err
			}
			switch key {
			case "defaults":
				if f.Defaults, err = nameList(dec, "defaults"); err != nil {
					return File{}, err
				}
			case "presets":
				if f.Presets, err = presets(dec); err != nil {
					return File{}, err
				}
			case "sessions":
				if err := expectDelim(dec, '[', "sessions", "an array of sessions"); err != nil {
					return File{}, err
				}
				if f.Sessions, err = sessions(dec, "sessions"); err != nil {
					return File{}, err
				}
			default:
				return File{}, fmt.Errorf("%w: unknown key %q at the top level: use defaults, presets and sessions", ErrInvalidFile, key)
			}
		}
		if _, err := dec.Token(); err != nil {
			return File{}, fmt.Errorf("%w: %v", ErrInvalidFile, err)
		}
		if !seen["sessions"] {
			return File{}, fmt.Errorf(`%w: no "sessions" key: list the sessions to import`, ErrInvalidFile)
		}
	default:
		return File{}, fmt.Errorf("%w: the document starts with %v: want a JSON array of sessions or an object with \"sessions\"", ErrInvalidFile, tok)
	}
	if _, err := dec.Token(); err == nil {
		return File{}, fmt.Errorf("%w: data after the document: one JSON value per file", ErrInvalidFile)
	}
	return f, nil
}

func expectDelim(dec *json.Decoder, d json.Delim, where, want string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	if tok != d {
		return fmt.Errorf("%w: %s is %v; want %s", ErrInvalidFile, where, describe(tok), want)
	}
	return nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return fmt.Sprintf("the string %q", clip.String(v, 64))
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

func objectKey(dec *json.Decoder, where string, seen map[string]bool) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	key := tok.(string) // object keys are strings
	if seen[key] {
		return "", fmt.Errorf("%w: %s: key %q appears twice; keep one", ErrInvalidFile, where, key)
	}
	seen[key] = true
	return key, nil
}

func sessions(dec *json.Decoder, where string) ([]Session, error) {
	var out []Session
	for i := 0; dec.More(); i++ {
		if i >= MaxSessions {
			return nil, fmt.Errorf("%w: more than %d sessions: split the file", ErrInvalidFile, MaxSessions)
		}
		s, err := session(dec, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if _, err := dec.Token(); err != nil { // ]
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	return out, nil
}

func session(dec *json.Decoder, where string) (Session, error) {
	if err := expectDelim(dec, '{', where, `a session object {"session": ..., "tools": ...}`); err != nil {
		return Session{}, err
	}
	var s Session
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec, where, seen)
		if err != nil {
			return Session{}, err
		}
		switch key {
		case "session":
			tok, err := dec.Token()
			id, ok := tok.(string)
			if err != nil || !ok {
				return Session{}, fmt.Errorf("%w: %s.session: want the session id as a string", ErrInvalidFile, where)
			}
			s.Session = id
		case "tools":
			if err := tools(dec, where+".tools", &s); err != nil {
				return Session{}, err
			}
		case "web_search":
			tok, err := dec.Token()
			if err != nil {
				return Session{}, fmt.Errorf("%w: %s.web_search: %v", ErrInvalidFile, where, err)
			}
			switch v := tok.(type) {
			case bool:
				s.WebSearch = &v
			case nil:
			default:
				return Session{}, fmt.Errorf("%w: %s.web_search is %s; want true, false or null", ErrInvalidFile, where, describe(tok))
			}
		case "defaults":
			if s.Defaults, err = nameList(dec, where+".defaults"); err != nil {
				return Session{}, err
			}
		default:
			return Session{}, fmt.Errorf("%w: %s: unknown key %q; use session, tools, web_search and defaults (remove other settings before importing)", ErrInvalidFile, where, key)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return Session{}, fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	if !seen["session"] {
		return Session{}, fmt.Errorf(`%w: %s: no "session" id`, ErrInvalidFile, where)
	}
	return s, nil
}

func tools(dec *json.Decoder, where string, s *Session) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	switch v := tok.(type) {
	case nil:
		s.Kind = ToolsNone
	case bool:
		s.Kind, s.Enabled = ToolsBool, v
	case json.Delim:
		if v == '[' {
			s.Kind = ToolsList
			s.Tools = []string{}
			for dec.More() {
				if len(s.Tools) >= events.MaxListLen*4 {
					return fmt.Errorf("%w: %s has more than %d names", ErrInvalidFile, where, events.MaxListLen*4)
				}
				tok, err := dec.Token()
				name, ok := tok.(string)
				if err != nil || !ok {
					return fmt.Errorf("%w: %s[%d] is %s; want a tool name string", ErrInvalidFile, where, len(s.Tools), describe(tok))
				}
				s.Tools = append(s.Tools, name)
			}
			return closing(dec, where)
		}
		s.Kind = ToolsDict
		s.Tools = []string{}
		seen := map[string]bool{}
		for dec.More() {
			name, err := objectKey(dec, where, seen)
			if err != nil {
				return err
			}
			if len(seen) > events.MaxListLen*4 {
				return fmt.Errorf("%w: %s has more than %d names", ErrInvalidFile, where, events.MaxListLen*4)
			}
			tok, err := dec.Token()
			on, ok := tok.(bool)
			if err != nil || !ok {
				return fmt.Errorf("%w: %s.%s is %s; want true (on) or false (off)", ErrInvalidFile, where, name, describe(tok))
			}
			if on {
				s.Tools = append(s.Tools, name)
			} else {
				s.Off = append(s.Off, name)
			}
		}
		return closing(dec, where)
	default:
		return fmt.Errorf("%w: %s is %s; want a list of names, a dict of name to true/false, true, false or null", ErrInvalidFile, where, describe(tok))
	}
	return nil
}

func nameList(dec *json.Decoder, where string) ([]string, error) {
	if err := expectDelim(dec, '[', where, "an array of tool names"); err != nil {
		return nil, err
	}
	out := []string{}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil, fmt.Errorf("%w: %s[%d] is %s; want a tool name string", ErrInvalidFile, where, len(out), describe(tok))
		}
		if len(out) >= events.MaxListLen*4 {
			return nil, fmt.Errorf("%w: %s has more than %d names", ErrInvalidFile, where, events.MaxListLen*4)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("%w: %s names %q twice; list each tool once", ErrInvalidFile, where, name)
		}
		out = append(out, name)
	}
	return out, closing(dec, where)
}

func presets(dec *json.Decoder) (map[string][]string, error) {
	if err := expectDelim(dec, '{', "presets", "an object of preset name to tool list"); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	seen := map[string]bool{}
	for dec.More() {
		name, err := objectKey(dec, "presets", seen)
		if err != nil {
			return nil, err
		}
		if out[name], err = nameList(dec, "presets."+name); err != nil {
			return nil, err
		}
	}
	return out, closing(dec, "presets")
}

// closing reads the token that ends an array or object.
func closing(dec *json.Decoder, where string) error {
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidFile, where, err)
	}
	return nil
}

// String names the form, for reports.
func (k ToolsKind) String() string {
	switch k {
	case ToolsNone:
		return "none"
	case ToolsBool:
		return "bool"
	case ToolsList:
		return "list"
	case ToolsDict:
		return "dict"
	}
	return "ToolsKind(" + strconv.Itoa(int(k)) + ")"
}
