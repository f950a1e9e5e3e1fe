package searcheval

import (
	"os"
	"testing"
)

// #27: the blind third set's table (engine beside plain BM25), logged only
// when SEARCHEVAL_HELDOUT3 is set: the set judges a ranking once, it is
// never looked at while tuning.
func TestReportBlindSet(t *testing.T) {
	docs, err := HeldOut3Docs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := HeldOut3Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 || len(qs) == 0 {
		t.Fatalf("blind set: %d tools, %d queries; want both non-empty", len(docs), len(qs))
	}
	if os.Getenv("SEARCHEVAL_HELDOUT3") != "" {
		t.Log("\n" + table("blind set (heldout3)", docs, qs))
	}
}
