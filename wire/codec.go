package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
)

// Strict decoding of requests, the same for every transport and for any
// program that reads a request: request structs are flat, each
// exported field has a json tag, which is also its query-parameter name
// (HTTP GET) and, for "session" and "tool", its path-value name (HTTP).
// Unknown, duplicated and mistyped fields are refused with a message that
// names them.

// ErrBadRequest is matched (errors.Is) by every error of a request that
// cannot be accepted as sent (malformed JSON, an unknown, duplicated or
// mistyped field, a bad query parameter). A server answers it with
// CodeInvalid (400).
var ErrBadRequest = errors.New("bad request")

// badRequestError is a request error whose message is only the problem;
// it matches ErrBadRequest.
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string        { return e.msg }
func (e *badRequestError) Is(target error) bool { return target == ErrBadRequest }

// BadRequest returns an error matching ErrBadRequest whose text is the
// formatted message.
func BadRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}

type fieldSet struct {
	index map[string]int
	names []string
}

var fieldSets sync.Map // reflect.Type -> *fieldSet

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{index: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fs.index[name] = i
		fs.names = append(fs.names, name)
	}
	fieldSets.Store(t, fs)
	return fs
}

// field returns the addressable field of *req tagged name.
func field(req any, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(req)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	v = v.Elem()
	i, ok := fieldsOf(v.Type()).index[name]
	if !ok {
		return reflect.Value{}, false
	}
	return v.Field(i), true
}

// FieldString reads the string field of the request *req whose json tag
// is name; false when it has none.
func FieldString(req any, name string) (string, bool) {
	f, ok := field(req, name)
	if !ok || f.Kind() != reflect.String {
		return "", false
	}
	return f.String(), true
}

func fieldList(req any) string {
	v := reflect.ValueOf(req)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	names := fieldsOf(v.Type()).names
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// BindPath sets the field of *req tagged name to a path value; a
// different value already in the field (from the body) is refused.
func BindPath(req any, name, value string) error {
	f, ok := field(req, name)
	if !ok {
		return nil
	}
	if cur := f.String(); cur != "" && cur != value {
		return BadRequest("%s %q in the body differs from %q in the path", name, clip.String(cur, clip.Max), clip.String(value, clip.Max))
	}
	f.SetString(value)
	return nil
}

// BindQuery sets fields of *req from query parameters, strictly: an
// unknown parameter, one of pathNames, or one given twice is refused;
// a structured field is JSON in the parameter.
func BindQuery(req any, q url.Values, pathNames []string) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	// Report the first bad parameter in a stable order.
	slices.Sort(keys)
	for _, k := range keys {
		vals := q[k]
		f, ok := field(req, k)
		if !ok || slices.Contains(pathNames, k) {
			return BadRequest("unknown query parameter %q: this operation takes %s", clip.String(k, clip.Max), queryList(req, pathNames))
		}
		if len(vals) != 1 {
			return BadRequest("query parameter %q is given %d times, give it once", k, len(vals))
		}
		if err := setString(f, k, vals[0]); err != nil {
			return err
		}
	}
	return nil
}

func queryList(req any, pathNames []string) string {
	var out []string
	for _, n := range strings.Split(fieldList(req), ", ") {
		if !slices.Contains(pathNames, n) && n != "(none)" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "no parameters"
	}
	return strings.Join(out, ", ")
}

func setString(f reflect.Value, name, s string) error {
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
		return nil
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return BadRequest("query parameter %q must be a non-negative integer, got %q", name, clip.String(s, clip.Max))
		}
		f.SetUint(n)
		return nil
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return BadRequest("query parameter %q must be an integer, got %q", name, clip.String(s, clip.Max))
		}
		f.SetInt(n)
		return nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return BadRequest("query parameter %q must be true or false, got %q", name, clip.String(s, clip.Max))
		}
		f.SetBool(b)
		return nil
	case reflect.Pointer:
		switch f.Type().Elem().Kind() {
		case reflect.Uint64, reflect.Bool:
			p := reflect.New(f.Type().Elem())
			if err := setString(p.Elem(), name, s); err != nil {
				return err
			}
			f.Set(p)
			return nil
		}
	}
	// A structured value: JSON in the parameter.
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f.Addr().Interface()); err != nil {
		if errors.Is(err, intent.ErrInvalid) {
			return BadRequest("query parameter %q: %s", name, err.Error())
		}
		return BadRequest("query parameter %q must be JSON (%s): %s", name, describeType(f.Type()), jsonMessage(err, name+"."))
	}
	return nil
}

// DecodeJSON decodes a JSON request body into *req strictly: an object
// naming a key twice, an unknown field, a value of the wrong type and data
// after the object are refused with an error matching ErrBadRequest (or
// the *Error a field's own decoder returned). An empty body leaves req as
// is.
func DecodeJSON(data []byte, req any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := duplicateKey(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		var we *Error
		if errors.Is(err, ErrBadRequest) || errors.As(err, &we) {
			return err
		}
		if errors.Is(err, intent.ErrInvalid) {
			return BadRequest("%s", err.Error()) // a field's own refusal (an override's kind), its message as is
		}
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return BadRequest("%s: the request's fields are %s", strings.TrimPrefix(err.Error(), "json: "), fieldList(req))
		}
		return BadRequest("request body: %s", jsonMessage(err, ""))
	}
	if _, err := dec.Token(); err != io.EOF {
		return BadRequest("request body: unexpected data after the JSON object")
	}
	return nil
}

// DuplicateKeyError is the error of a body in which an object names key
// twice (folded: encoding/json matches fields case-insensitively); prev
// is the key as first sent and where the object it is in.
func DuplicateKeyError(prev, key, where string) error {
	if prev == key {
		return BadRequest("request body: key %q appears twice in %s: send each field once", clip.String(key, clip.Max), where)
	}
	return BadRequest("request body: keys %q and %q of %s name the same field: send it once", clip.String(prev, clip.Max), clip.String(key, clip.Max), where)
}

// duplicateKey refuses a JSON body in which an object names a key twice
// : encoding/json keeps the last value, so {"session":"a",
// "session":"b"} would act on a session that a proxy or a log that reads
// the first one never saw. Keys are compared case-insensitively too, as
// encoding/json matches struct fields. It walks the tokens without
// building values; a syntax error is left to the decoder, which names it.
func duplicateKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*jsonFrame
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		if len(stack) > 0 && expectKey {
			top := stack[len(stack)-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				expectKey = len(stack) > 0 && stack[len(stack)-1].obj
				continue
			}
			k, _ := tok.(string)
			fold := strings.ToLower(k)
			if prev, dup := top.keys[fold]; dup {
				return DuplicateKeyError(prev, k, top.path())
			}
			top.keys[fold] = k
			top.last = k
			expectKey = false
			continue
		}
		// A value: in an object after its key, in an array, or the top.
		var at jsonFrame // where the value sits
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			at.in = top
			if top.obj {
				at.key = top.last
				expectKey = true
			} else {
				at.index = top.next
				top.next++
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return nil // too deep for the decoder, which says so
			}
			f := at
			if tok == json.Delim('{') {
				f.obj, f.keys = true, map[string]string{}
			}
			stack = append(stack, &f)
			expectKey = f.obj
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			expectKey = len(stack) > 0 && stack[len(stack)-1].obj
		}
	}
}

// maxJSONDepth is encoding/json's nesting limit: the decoder refuses a
// body nested deeper, so duplicateKey walks no further.
const maxJSONDepth = 10_000

// maxPathArrays bounds the array levels an error's path spells out: the
// innermost ones, then how many more.
const maxPathArrays = 8

// jsonFrame is an object or array duplicateKey is in, and where it sits
// in its container. Its path is spelled out only for an error: built for
// every value, the paths of nested arrays would take memory quadratic in
// their depth.
type jsonFrame struct {
	in    *jsonFrame // the container; nil at the top
	key   string     // the key it is the value of, in an object
	index int        // its index, in an array
	obj   bool
	keys  map[string]string // folded key -> key as sent
	last  string            // the key whose value comes next
	next  int               // the next element's index
}

// path says where the frame is: "the top-level object", `object "k"`,
// or "element i of <its array's path>", naming at most maxPathArrays
// array levels and counting the others.
func (f *jsonFrame) path() string {
	var parts []string
	more := 0
	for ; f.in != nil && !f.in.obj; f = f.in {
		if len(parts) < maxPathArrays {
			parts = append(parts, fmt.Sprintf("element %d", f.index))
		} else {
			more++
		}
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more arrays", more))
	}
	if f.in == nil {
		parts = append(parts, "the top-level object")
	} else {
		parts = append(parts, fmt.Sprintf("object %q", clip.String(f.key, clip.Max)))
	}
	return strings.Join(parts, " of ")
}

// jsonMessage turns a json decoding error into a message naming the field.
func jsonMessage(err error, prefix string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("want %s, got a JSON %s", describeType(te.Type), te.Value)
		}
		return fmt.Sprintf("field %q must be %s, got a JSON %s", prefix+te.Field, describeType(te.Type), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "truncated JSON"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		return "a non-negative integer"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return describeType(t.Elem()) + " or null"
	}
	return t.String()
}

// Marshal encodes a reply as JSON: lists as [] and objects as {}, never
// null (withArrays), HTML characters unescaped, no trailing newline.
func Marshal(v any) ([]byte, error) {
	if rr, ok := v.(RawReply); ok {
		rest, raw := rr.SplitRaw(rawMark)
		if len(raw) >= minSplice {
			b, err := marshal(rest)
			if err != nil {
				return nil, err
			}
			if i := bytes.Index(b, rawMark); i >= 0 && !bytes.Contains(b[i+len(rawMark):], rawMark) {
				out := make([]byte, 0, len(b)-len(rawMark)+len(raw))
				out = append(out, b[:i]...)
				out = append(out, raw...)
				return append(out, b[i+len(rawMark):]...), nil
			}
		}
	}
	return marshal(v)
}

// RawReply is implemented by a reply that carries a large JSON value the
// engine rendered itself, valid and compact (a turn's provider tools
// array): Marshal encodes the rest of the reply and writes that value in
// as it is, where encoding/json would scan and compact it again (that
// scan of a 40 KB rendering was 30% of an HTTP turn's CPU,
// BenchmarkHTTPTurn).
type RawReply interface {
	// SplitRaw returns the reply with the raw value replaced by mark (a
	// JSON string), and the raw value.
	SplitRaw(mark json.RawMessage) (rest any, raw []byte)
}

// minSplice is the smallest raw value Marshal splices in; a smaller one is
// encoded as usual.
const minSplice = 1024

// rawMark is the placeholder Marshal splices a RawReply's value over: a
// JSON string of 32 random hex digits drawn at start, which no other part
// of a reply can spell (its quotes would be escaped inside a string).
var rawMark = func() json.RawMessage {
	var r [16]byte
	_, _ = rand.Read(r[:])
	return json.RawMessage(`"` + hex.EncodeToString(r[:]) + `"`)
}()

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(withArrays(v)); err != nil {
		return nil, fmt.Errorf("encode reply: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// IsMsgpack reports whether a media type (a Content-Type) is msgpack.
func IsMsgpack(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return false
	}
	switch mt {
	case MIMEMsgpack, "application/x-msgpack", "application/vnd.msgpack":
		return true
	}
	return false
}

// WantsMsgpack reports whether an Accept header asks for msgpack.
func WantsMsgpack(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if IsMsgpack(strings.TrimSpace(part)) {
			return true
		}
	}
	return false
}
