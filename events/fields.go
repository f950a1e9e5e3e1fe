package events

// Typed field access on the generic map parse returns: each reader names
// the key and the kind it found when the value does not fit.

import (
	"fmt"
	"math"
)

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a bool"
	case int64, uint64:
		return "an integer"
	case float64:
		return "a float"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	}
	return "an extension value"
}

func strField(m map[string]any, key string, required bool) (string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		if required {
			return "", fmt.Errorf("key %q is missing: %w", key, ErrMalformed)
		}
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("key %q holds %s, want a string: %w", key, kind(raw), ErrMalformed)
	}
	return s, nil
}

func boolPtrField(m map[string]any, key string) (*bool, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want a bool or nil: %w", key, kind(raw), ErrMalformed)
	}
	return &b, nil
}

// intField reads an integer; integral floats are accepted for writers that
// only have doubles.
func intField(m map[string]any, key string, required bool) (int64, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		if required {
			return 0, fmt.Errorf("key %q is missing: %w", key, ErrMalformed)
		}
		return 0, nil
	}
	switch v := raw.(type) {
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("key %q holds %d, out of int64 range: %w", key, v, ErrMalformed)
		}
		return int64(v), nil
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v), nil
		}
		return 0, fmt.Errorf("key %q holds %v, want an integer: %w", key, v, ErrMalformed)
	}
	return 0, fmt.Errorf("key %q holds %s, want an integer: %w", key, kind(raw), ErrMalformed)
}

func uintField(m map[string]any, key string) (uint64, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return 0, nil
	}
	switch v := raw.(type) {
	case uint64:
		return v, nil
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("key %q holds %d, want a non-negative integer: %w", key, v, ErrMalformed)
		}
		return uint64(v), nil
	case float64:
		if v == math.Trunc(v) && v >= 0 && v < 1<<64 {
			return uint64(v), nil
		}
		return 0, fmt.Errorf("key %q holds %v, want a non-negative integer: %w", key, v, ErrMalformed)
	}
	return 0, fmt.Errorf("key %q holds %s, want a non-negative integer: %w", key, kind(raw), ErrMalformed)
}

// strsField reads a list of strings; nil/absent stays nil, an empty array
// is an empty non-nil slice.
func strsField(m map[string]any, key string, max int) ([]string, error) {
	return listField[string](m, key, max, "string")
}

// mapsField reads a list of maps; nil/absent stays nil.
func mapsField(m map[string]any, key string, max int) ([]map[string]any, error) {
	return listField[map[string]any](m, key, max, "map")
}

// listField reads a list of at most max values of type E (named want in
// errors); nil/absent stays nil, an empty array is an empty non-nil
// slice.
func listField[E any](m map[string]any, key string, max int, want string) ([]E, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want an array of %ss: %w", key, kind(raw), want, ErrMalformed)
	}
	if len(arr) > max {
		return nil, fmt.Errorf("key %q has %d entries, at most %d allowed: %w", key, len(arr), max, ErrMalformed)
	}
	out := make([]E, len(arr))
	for i, x := range arr {
		if out[i], ok = x.(E); !ok {
			return nil, fmt.Errorf("key %q entry %d holds %s, want a %s: %w", key, i, kind(x), want, ErrMalformed)
		}
	}
	return out, nil
}
