package intent

import "slices"

// NumFields is the number of fields of Intent; see Intent.Field.
const NumFields = 5

// Field returns the msgpack key of field i of Intent (0 <= i < NumFields,
// in struct and wire order) and the address of that field in in: a **bool
// (a switch: true, false or nil), a *string ("" when unset) or a *[]string
// (a list of names or patterns, nil when unset). Clone, Alike and
// Fingerprint, and the msgpack codecs of events and of stored views, go
// through it, so a new intent field is its struct field and one case here.
// For i out of range it returns "" and nil.
func (in *Intent) Field(i int) (string, any) {
	switch i {
	case 0:
		return "enabled", &in.Enabled
	case 1:
		return "web_search", &in.WebSearch
	case 2:
		return "preset", &in.Preset
	case 3:
		return "disabled", &in.Disabled
	case 4:
		return "picked", &in.Picked
	}
	return "", nil
}

// InsertSorted adds name to the sorted set xs, the form of Disabled. It
// copies on write, so a clone's lists are never written through.
func InsertSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if found {
		return xs
	}
	out := make([]string, 0, len(xs)+1)
	out = append(out, xs[:i]...)
	out = append(out, name)
	return append(out, xs[i:]...)
}

// RemoveSorted removes name from the sorted set xs, copying on write; the
// empty set is nil.
func RemoveSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if !found {
		return xs
	}
	if len(xs) == 1 {
		return nil
	}
	out := make([]string, 0, len(xs)-1)
	out = append(out, xs[:i]...)
	return append(out, xs[i+1:]...)
}
