package wire

import (
	"encoding"
	"encoding/json"
	"reflect"
)

// Lists in replies are [] and objects {}, never null (wire-format.md):
// encoding/json writes a nil slice or map as null, so Marshal passes
// every reply through withArrays, the one place that makes the rule hold
// for every operation.

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// withArrays returns v with every nil slice and nil map reachable through
// exported fields, slice elements, map values, pointers and interfaces
// replaced by an empty one. It copies what it changes and never writes to
// v (replies may share state with the engine). Values whose type encodes
// itself (json.Marshaler, encoding.TextMarshaler) and byte slices are left
// as they are.
func withArrays(v any) any {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	out, changed := fillArrays(rv, 0)
	if !changed {
		return v
	}
	return out.Interface()
}

// maxArrayDepth bounds the walk (reply types are shallow and acyclic).
const maxArrayDepth = 32

// fillArrays returns v with nil lists filled, and whether anything
// changed; an unchanged v is returned as is.
func fillArrays(v reflect.Value, depth int) (reflect.Value, bool) {
	if depth > maxArrayDepth || !v.IsValid() {
		return v, false
	}
	t := v.Type()
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return v, false
	}
	switch t.Kind() {
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte encodes as a string
			return v, false
		}
		if v.IsNil() {
			return reflect.MakeSlice(t, 0, 0), true
		}
		var out reflect.Value
		for i := range v.Len() {
			e, ch := fillArrays(v.Index(i), depth+1)
			if !ch {
				continue
			}
			if !out.IsValid() {
				out = reflect.MakeSlice(t, v.Len(), v.Len())
				reflect.Copy(out, v)
			}
			out.Index(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	case reflect.Map:
		if v.IsNil() {
			return reflect.MakeMap(t), true
		}
		var out reflect.Value
		iter := v.MapRange()
		for iter.Next() {
			e, ch := fillArrays(iter.Value(), depth+1)
			if !ch {
				continue
			}
			if !out.IsValid() {
				out = reflect.MakeMapWithSize(t, v.Len())
				for it := v.MapRange(); it.Next(); {
					out.SetMapIndex(it.Key(), it.Value())
				}
			}
			out.SetMapIndex(iter.Key(), e)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		e, ch := fillArrays(v.Elem(), depth+1)
		if !ch {
			return v, false
		}
		if t.Kind() == reflect.Pointer {
			p := reflect.New(t.Elem()) // a new pointer to the filled copy
			p.Elem().Set(e)
			return p, true
		}
		out := reflect.New(t).Elem() // an interface holding the filled copy
		out.Set(e)
		return out, true
	case reflect.Struct:
		var out reflect.Value
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			e, ch := fillArrays(v.Field(i), depth+1)
			if !ch {
				continue
			}
			if !out.IsValid() {
				out = reflect.New(t).Elem()
				out.Set(v)
			}
			out.Field(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	}
	return v, false
}
