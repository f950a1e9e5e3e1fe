// Package msgpackjson is the msgpack form of the API's JSON bodies: a
// msgpack request body is checked (bounds, string keys, no extension
// types, no duplicated keys) and converted to JSON, so that the same
// strict JSON rules apply (wire.DecodeJSON); a JSON reply is re-encoded
// as msgpack with the same keys. The transports (package api) use it when
// Content-Type or Accept names msgpack.
package msgpackjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/msgpackcheck"
	"github.com/toolintent/engine/wire"
)

// bodyLimits bound a msgpack request body before it is decoded: a
// request object is a few levels deep (request, override, intent,
// a list), its keys are strings, and it has no extension types.
var bodyLimits = msgpackcheck.Limits{MaxDepth: 16, MaxElements: 1 << 16, StringKeys: true, NoExt: true}

// DecodeBody decodes a request body into *req: JSON, or msgpack when
// contentType says so (checked against bodyLimits, then converted to JSON,
// so the same strict rules apply). An empty body leaves req as is. Errors
// match wire.ErrBadRequest.
func DecodeBody(data []byte, contentType string, req any) error {
	if wire.IsMsgpack(contentType) && len(data) > 0 {
		lim := bodyLimits
		lim.MaxBytes = len(data) // the transports bound the size
		if err := msgpackcheck.Check(data, lim); err != nil {
			return wire.BadRequest("request body is not one msgpack object within the limits (depth %d, %d elements, string keys, no extension types): %v",
				bodyLimits.MaxDepth, bodyLimits.MaxElements, strings.TrimPrefix(err.Error(), msgpackcheck.ErrInvalid.Error()+": "))
		}
		if err := msgpackDuplicateKey(data); err != nil {
			return err
		}
		var v any
		if err := msgpack.Unmarshal(data, &v); err != nil {
			return wire.BadRequest("request body is not valid msgpack: %v", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return wire.BadRequest("request body: msgpack value has no JSON form (maps need string keys): %v", err)
		}
		data = b
	}
	return wire.DecodeJSON(data, req)
}

// msgpackDuplicateKey refuses a msgpack body in which a map names a key
// twice, as wire.DecodeJSON does for JSON (checked against bodyLimits
// first, so the recursion is at most MaxDepth deep): the map would
// otherwise collapse to its last value when converted to JSON. A
// malformed body is left to the decoder.
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
					return wire.DuplicateKeyError(prev, k, path)
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

// EncodeReply encodes a reply as JSON (wire.Marshal) or, when msgpack is
// set, as msgpack with the same shape (the JSON re-encoded: field for
// field the same keys, numbers as integers where they are integral, times
// as RFC 3339 strings).
func EncodeReply(v any, msgpackReply bool) ([]byte, error) {
	out, err := wire.Marshal(v)
	if err != nil || !msgpackReply {
		return out, err
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
