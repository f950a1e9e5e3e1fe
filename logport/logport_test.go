package logport_test

import (
	"errors"
	"testing"

	"github.com/toolintent/engine/logport"
)

func TestCollectKeepsTheOrderAndWhatCameBeforeAnError(t *testing.T) {
	boom := errors.New("boom")
	got, err := logport.Collect(func(fn func(logport.Record) error) error {
		for seq := uint64(1); seq <= 3; seq++ {
			if err := fn(logport.Record{Seq: seq}); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the scan's error", err)
	}
	if len(got) != 3 || got[0].Seq != 1 || got[1].Seq != 2 || got[2].Seq != 3 {
		t.Fatalf("records = %+v, want sequences 1, 2, 3 in order", got)
	}
}
