package searcheval

import (
	"os"
	"testing"
)

// The blind sets' tables (engine beside plain BM25): the third set
// and the fourth and fifth sets' final splits, logged only when SEARCHEVAL_HELDOUT3
// is set: they judge a ranking once, they are never looked at while
// tuning.
func TestReportBlindSet(t *testing.T) {
	docs, err := HeldOut3.Docs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := HeldOut3.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 || len(qs) == 0 {
		t.Fatalf("blind set: %d tools, %d queries; want both non-empty", len(docs), len(qs))
	}
	d4, err := HeldOut4.Docs()
	if err != nil {
		t.Fatal(err)
	}
	q4, err := HeldOut4.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(ofSplit(q4, "final")) == 0 {
		t.Fatal("mcp4 has no final queries")
	}
	d5, err := HeldOut5.Docs()
	if err != nil {
		t.Fatal(err)
	}
	q5, err := HeldOut5.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(ofSplit(q5, "final")) == 0 {
		t.Fatal("mcp5 has no final queries")
	}
	if os.Getenv("SEARCHEVAL_HELDOUT3") != "" {
		t.Log("\n" + table("blind set (heldout3)", docs, qs))
		t.Log("\n" + table("blind set (heldout4 final)", d4, ofSplit(q4, "final")))
		t.Log("\n" + table("blind set (heldout5 final)", d5, ofSplit(q5, "final")))
	}
}
