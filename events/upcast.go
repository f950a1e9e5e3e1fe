package events

import "fmt"

// upcaster rewrites the generic form of one event (the whole envelope map,
// payload under "data") from one schema version to the next. It must not
// panic on any input and must leave a map the next version's decoder reads.
type upcaster func(env map[string]any) error

type upcastKey struct {
	typ  Type
	from int // the version the upcaster reads; it produces from+1
}

// upcasters is the table of schema migrations. A (type, version) pair
// with no entry is unchanged by that version step. Version 1 had no
// "channel" and "actor"; absent keys already decode as "", so only the
// renamed payload keys need an entry.
var upcasters = map[upcastKey]upcaster{
	{TypeToolsToggled, 1}: renameDataKey("tools_enabled", "enabled"),
	{TypePresetChosen, 1}: renameDataKey("toolset", "preset"),
}

// upcast applies every migration from version v up to SchemaVersion.
func upcast(env map[string]any, t Type, v int) error {
	for from := v; from < SchemaVersion; from++ {
		if u, ok := upcasters[upcastKey{t, from}]; ok {
			if err := u(env); err != nil {
				return fmt.Errorf("upcast %s from v%d to v%d: %w", t, from, from+1, err)
			}
		}
		env[keyVersion] = int64(from + 1)
	}
	return nil
}

// renameDataKey moves data[old] to data[new] unless data[new] is already
// present (a writer that sent both is taken at its newer word).
func renameDataKey(old, new string) upcaster {
	return func(env map[string]any) error {
		data, err := dataMap(env)
		if err != nil {
			return err
		}
		v, ok := data[old]
		if !ok {
			return nil
		}
		delete(data, old)
		if _, exists := data[new]; !exists {
			data[new] = v
		}
		env[keyData] = data
		return nil
	}
}
