package msgpackcheck

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func enc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Well-formed values pass, and Check allocates nothing.
func TestCheckAcceptsValues(t *testing.T) {
	for _, v := range []any{
		nil, true, 1, -1, int64(-1 << 40), uint64(1 << 63), 1.5, float32(2), "", "x",
		strings.Repeat("s", 70000), []byte{1, 2, 3}, []any{}, map[string]any{},
		map[string]any{"session": "s1", "commands": []any{map[string]any{"type": "ToolsToggled", "enabled": true}}},
		[]any{[]any{[]any{"deep"}}},
	} {
		b := enc(t, v)
		if err := Check(b, Limits{MaxBytes: 1 << 20}); err != nil {
			t.Errorf("Check(%x) of %T: %v", b, v, err)
		}
		if n := testing.AllocsPerRun(10, func() { _ = Check(b, Limits{}) }); n != 0 {
			t.Errorf("Check of %T allocates %v times", v, n)
		}
	}
}

// Each hostile shape is refused before anything is
// allocated for it, with an error naming what is wrong.
func TestCheckRefuses(t *testing.T) {
	deep := bytes.Repeat([]byte{0x91}, 1<<20)
	cases := []struct {
		name, mention string
		data          []byte
		lim           Limits
	}{
		{"array32 of 4G elements", "claims 4294967295 elements", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, Limits{}},
		{"map32 of 4G entries", "claims", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, Limits{}},
		{"str32 of 4 GiB", "exceeds", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, Limits{}},
		{"bin32 of 4 GiB", "exceeds", []byte{0xc6, 0xff, 0xff, 0xff, 0xff}, Limits{}},
		{"ext32 of 4 GiB", "exceeds", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 1}, Limits{}},
		{"1 MiB of nested one-element arrays", "nesting deeper than 32", deep, Limits{MaxBytes: 2 << 20}},
		{"depth over the limit", "nesting deeper than 2", []byte{0x91, 0x91, 0x91, 0xc0}, Limits{MaxDepth: 2}},
		{"trailing bytes", "1 trailing bytes", []byte{0xc0, 0xc0}, Limits{}},
		{"truncated array", "claims 2 elements, only 1 bytes left", []byte{0x92, 0xc0}, Limits{}},
		{"truncated map", "truncated at byte 3", []byte{0x81, 0xa1, 0x61}, Limits{}},
		{"0xc1", "0xc1", []byte{0xc1}, Limits{}},
		{"empty", "empty", nil, Limits{}},
		{"too many elements", "more than 3 elements", []byte{0x94, 1, 2, 3, 4}, Limits{MaxElements: 3}},
		{"too large", "exceed the limit of 2", []byte{0x92, 1, 2}, Limits{MaxBytes: 2}},
		{"integer map key", "not a string", []byte{0x81, 0x01, 0xc0}, Limits{StringKeys: true}},
		{"timestamp ext", "extension", []byte{0xd6, 0xff, 0, 0, 0, 0}, Limits{NoExt: true}},
		{"truncated uint64", "needs 8 bytes", []byte{0xcf, 1, 2}, Limits{}},
	}
	for _, c := range cases {
		err := Check(c.data, c.lim)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: Check = %v, want ErrInvalid mentioning %q", c.name, err, c.mention)
		}
	}
}

// allocOracle is the allocation bound of a decode after Check: a fixed
// multiple of the input plus a constant.
func allocOracle(n int) uint64 { return uint64(64*n + 64<<10) }

// Check never panics; what it accepts (strings keys, no
// extensions) msgpack.Unmarshal decodes without error and within the
// allocation oracle; what it refuses as trailing or truncated
// msgpack cannot decode as one whole value either.
func FuzzCheck(f *testing.F) {
	for _, s := range [][]byte{
		{0xdd, 0xff, 0xff, 0xff, 0xff}, {0xdf, 0xff, 0xff, 0xff, 0xff}, bytes.Repeat([]byte{0x91}, 100),
		{0x81, 0xa1, 'a', 0x92, 0xc0, 0xc3}, {0xc0, 0xc0}, {0x90}, {0x80},
	} {
		f.Add(s)
	}
	f.Add(enc(f, map[string]any{"session": "s", "commands": []any{map[string]any{"type": "ToolDisabled", "name": "bash"}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{StringKeys: true, NoExt: true}
		if err := Check(data, lim); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var v any
		err := msgpack.Unmarshal(data, &v)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("Check accepted %x but msgpack.Unmarshal fails: %v", data, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > allocOracle(len(data)) {
			t.Fatalf("decoding %d checked bytes allocated %d bytes, over the oracle %d", len(data), got, allocOracle(len(data)))
		}
	})
}
