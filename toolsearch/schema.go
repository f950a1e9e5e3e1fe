package toolsearch

import (
	"unicode/utf16"
	"unicode/utf8"
)

// maxSchemaDepth bounds the nesting the schema walk follows.
const maxSchemaDepth = 64

// SchemaText extracts the searchable text of a JSON Schema: the names of
// its properties (at every depth: nested objects, array items, $defs) and
// the strings of its "description", "title" and "enum" values. The walk is
// a tolerant scan, not a validator: on malformed input it returns what it
// read before the fault. It allocates only the returned strings.
func SchemaText(schema []byte) (names, texts []string) {
	s := scanner{b: schema}
	s.value(0, false, &names, &texts)
	return names, texts
}

type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one JSON value. propsMap is true when the value is the
// object of a "properties" key, whose keys are property names.
func (s *scanner) value(depth int, propsMap bool, names, texts *[]string) {
	s.ws()
	if s.bad || s.i >= len(s.b) || depth > maxSchemaDepth {
		s.bad = true
		return
	}
	switch s.b[s.i] {
	case '{':
		s.list('}', func() {
			key, ok := s.str()
			if !ok {
				return
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				s.bad = true
				return
			}
			s.i++
			s.ws()
			switch {
			case propsMap:
				*names = append(*names, key)
				s.value(depth+1, false, names, texts)
			case (key == "description" || key == "title") && s.i < len(s.b) && s.b[s.i] == '"':
				s.text(texts)
			case key == "enum" && s.i < len(s.b) && s.b[s.i] == '[':
				s.enum(depth+1, names, texts)
			default:
				s.value(depth+1, key == "properties", names, texts)
			}
		})
	case '[':
		s.list(']', func() { s.value(depth+1, false, names, texts) })
	case '"':
		s.str()
	default:
		// number, true, false, null: skip to the next delimiter
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// enum scans an "enum" array, keeping its string members as text.
func (s *scanner) enum(depth int, names, texts *[]string) {
	s.list(']', func() {
		if s.i < len(s.b) && s.b[s.i] == '"' {
			s.text(texts)
		} else {
			s.value(depth, false, names, texts)
		}
	})
}

// list scans an object or array from its opening bracket at s.i through
// the closing one: member scans each member and sets s.bad on a fault,
// which ends the scan.
func (s *scanner) list(closing byte, member func()) {
	s.i++ // '{' or '['
	for {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == closing {
			s.i++
			return
		}
		member()
		if s.bad {
			return
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == closing {
			s.i++
			return
		}
		s.bad = true
		return
	}
}

// text scans a string at s.i and keeps it as text unless it is empty.
func (s *scanner) text(texts *[]string) {
	if t, ok := s.str(); ok && t != "" {
		*texts = append(*texts, t)
	}
}

// str scans a JSON string at s.i and returns it decoded.
func (s *scanner) str() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.bad = true
		return "", false
	}
	s.i++
	start, esc := s.i, false
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '\\' {
			esc = true
			s.i += 2
			continue
		}
		if c == '"' {
			raw := s.b[start:s.i]
			s.i++
			if !esc {
				return string(raw), true
			}
			return unescape(raw), true
		}
		s.i++
	}
	s.bad = true
	return "", false
}

// unescape decodes the body of a JSON string with escapes; a malformed
// escape is kept as written.
func unescape(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, n := hex4(raw[i+1:])
			if n == 0 {
				out = append(out, '\\', 'u')
				continue
			}
			i += n
			if utf16.IsSurrogate(r) {
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if r2, n2 := hex4(raw[i+3:]); n2 > 0 {
						r = utf16.DecodeRune(r, r2)
						i += 2 + n2
					}
				}
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, raw[i])
		}
	}
	return string(out)
}

// hex4 reads four hex digits; n is 4, or 0 when they are not there.
func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0
		}
	}
	return r, 4
}
