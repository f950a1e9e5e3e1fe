package events

import "testing"

// Decode cost per event type bounds replay and catch-up cost.
func BenchmarkDecode(b *testing.B) {
	for _, v := range vectors() {
		if v.wantErr != nil {
			continue
		}
		raw := v.bytes(b)
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Encode cost per append.
func BenchmarkEncode(b *testing.B) {
	for _, v := range vectors() {
		if v.env == nil {
			continue
		}
		e := *v.env
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
