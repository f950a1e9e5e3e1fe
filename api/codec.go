package api

import (
	"bytes"
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

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/msgpackcheck"
	"github.com/toolintent/engine/wire"
)

// Request structs are flat: each exported field has a json tag, which is
// also its query-parameter name (GET) and, for "session" and "tool", its
// path-value name (HTTP).

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

// fieldString reads a string field of *req.
func fieldString(req any, name string) (string, bool) {
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

// bindPath sets a path value; a different value from the body is refused.
func bindPath(req any, name, value string) error {
	f, ok := field(req, name)
	if !ok {
		return nil
	}
	if cur := f.String(); cur != "" && cur != value {
		return badRequest("%s %q in the body differs from %q in the path", name, clip.String(cur, clip.Max), clip.String(value, clip.Max))
	}
	f.SetString(value)
	return nil
}

// bindQuery sets fields of *req from query parameters, strictly.
func bindQuery(req any, q url.Values, pathNames []string) error {
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
			return badRequest("unknown query parameter %q: this operation takes %s", clip.String(k, clip.Max), queryList(req, pathNames))
		}
		if len(vals) != 1 {
			return badRequest("query parameter %q is given %d times, give it once", k, len(vals))
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
			return badRequest("query parameter %q must be a non-negative integer, got %q", name, clip.String(s, clip.Max))
		}
		f.SetUint(n)
		return nil
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return badRequest("query parameter %q must be an integer, got %q", name, clip.String(s, clip.Max))
		}
		f.SetInt(n)
		return nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return badRequest("query parameter %q must be true or false, got %q", name, clip.String(s, clip.Max))
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
		return badRequest("query parameter %q must be JSON (%s): %s", name, describeType(f.Type()), jsonMessage(err, name+"."))
	}
	return nil
}

// bodyLimits bound a msgpack request body before it is decoded (issue
// 11): a request object is a few levels deep (request, override, intent,
// a list), its keys are strings, and it has no extension types.
var bodyLimits = msgpackcheck.Limits{MaxDepth: 16, MaxElements: 1 << 16, StringKeys: true, NoExt: true}

// decodeBody decodes a request body into *req: JSON, or msgpack when
// contentType says so (checked against bodyLimits, then converted to JSON,
// so the same strict rules apply). An empty body leaves req as is.
func decodeBody(data []byte, contentType string, req any) error {
	if isMsgpack(contentType) && len(data) > 0 {
		lim := bodyLimits
		lim.MaxBytes = len(data) // the transports bound the size
		if err := msgpackcheck.Check(data, lim); err != nil {
			return badRequest("request body is not one msgpack object within the limits (depth %d, %d elements, string keys, no extension types): %v",
				bodyLimits.MaxDepth, bodyLimits.MaxElements, strings.TrimPrefix(err.Error(), msgpackcheck.ErrInvalid.Error()+": "))
		}
		if err := msgpackDuplicateKey(data); err != nil {
			return err
		}
		var v any
		if err := msgpack.Unmarshal(data, &v); err != nil {
			return badRequest("request body is not valid msgpack: %v", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return badRequest("request body: msgpack value has no JSON form (maps need string keys): %v", err)
		}
		data = b
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := duplicateKey(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		var we *wire.Error
		if errors.Is(err, ErrBadRequest) || errors.As(err, &we) {
			return err
		}
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return badRequest("%s: the request's fields are %s", strings.TrimPrefix(err.Error(), "json: "), fieldList(req))
		}
		return badRequest("request body: %s", jsonMessage(err, ""))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("request body: unexpected data after the JSON object")
	}
	return nil
}

// duplicateKey refuses a JSON body in which an object names a key twice
// (#24 row 12(b)): encoding/json keeps the last value, so {"session":"a",
// "session":"b"} would act on a session that a proxy or a log that reads
// the first one never saw. Keys are compared case-insensitively too, as
// encoding/json matches struct fields. It walks the tokens without
// building values; a syntax error is left to the decoder, which names it.
func duplicateKey(data []byte) error {
	type frame struct {
		path string
		obj  bool
		keys map[string]string // folded key -> key as sent
		last string            // the key whose value comes next
		next int               // array index
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
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
				if prev == k {
					return badRequest("request body: key %q appears twice in %s: send each field once", clip.String(k, clip.Max), top.path)
				}
				return badRequest("request body: keys %q and %q of %s name the same field: send it once", clip.String(prev, clip.Max), clip.String(k, clip.Max), top.path)
			}
			top.keys[fold] = k
			top.last = k
			expectKey = false
			continue
		}
		// A value: in an object after its key, in an array, or the top.
		path := "the top-level object"
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.obj {
				path = fmt.Sprintf("object %q", clip.String(top.last, clip.Max))
				expectKey = true
			} else {
				path = fmt.Sprintf("element %d of %s", top.next, top.path)
				top.next++
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{path: path, obj: true, keys: map[string]string{}})
			expectKey = true
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
			expectKey = false
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			expectKey = len(stack) > 0 && stack[len(stack)-1].obj
		}
	}
}

// msgpackDuplicateKey is duplicateKey for a msgpack body (checked
// against bodyLimits first, so the recursion is at most MaxDepth deep): a
// map naming a key twice would otherwise collapse to its last value when
// converted to JSON. A malformed body is left to the decoder.
func msgpackDuplicateKey(data []byte) error {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	errMalformed := errors.New("malformed")
	var walk func(path string) error
	walk = func(path string) error {
		c, err := dec.PeekCode()
		if err != nil {
			return errMalformed
		}
		switch {
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err := dec.DecodeMapLen()
			if err != nil {
				return errMalformed
			}
			seen := make(map[string]string, max(n, 0))
			for range n {
				k, err := dec.DecodeString()
				if err != nil {
					return errMalformed
				}
				fold := strings.ToLower(k)
				if prev, dup := seen[fold]; dup {
					if prev == k {
						return badRequest("request body: key %q appears twice in %s: send each field once", clip.String(k, clip.Max), path)
					}
					return badRequest("request body: keys %q and %q of %s name the same field: send it once", clip.String(prev, clip.Max), clip.String(k, clip.Max), path)
				}
				seen[fold] = k
				if err := walk(fmt.Sprintf("object %q", clip.String(k, clip.Max))); err != nil {
					return err
				}
			}
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err := dec.DecodeArrayLen()
			if err != nil {
				return errMalformed
			}
			for i := range n {
				if err := walk(fmt.Sprintf("element %d of %s", i, path)); err != nil {
					return err
				}
			}
		default:
			if dec.Skip() != nil {
				return errMalformed
			}
		}
		return nil
	}
	if err := walk("the top-level object"); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil
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

// encodeReply encodes a reply as JSON or, when msgpack is set, as msgpack
// with the same shape (the JSON re-encoded: field for field the same keys,
// numbers as integers where they are integral, times as RFC 3339 strings).
func encodeReply(v any, msgpackReply bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(withArrays(v)); err != nil {
		return nil, fmt.Errorf("encode reply: %w", err)
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if !msgpackReply {
		return out, nil
	}
	return jsonToMsgpack(out)
}

func jsonToMsgpack(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("encode msgpack reply: %w", err)
	}
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(numbers(v)); err != nil {
		return nil, fmt.Errorf("encode msgpack reply: %w", err)
	}
	return b.Bytes(), nil
}

// numbers replaces json.Number values by int64, uint64 or float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n
		}
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

func isMsgpack(mediaType string) bool {
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

// wantsMsgpack reports whether an Accept header asks for msgpack.
func wantsMsgpack(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if isMsgpack(strings.TrimSpace(part)) {
			return true
		}
	}
	return false
}

func contentType(msgpackReply bool) string {
	if msgpackReply {
		return MIMEMsgpack
	}
	return MIMEJSON
}
