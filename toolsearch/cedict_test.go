package toolsearch

import (
	"slices"
	"strings"
	"testing"
)

// The embedded CC-CEDICT table is sorted by
// headword, one line a headword, each found by the binary search, with
// the stemmed terms of its English glosses.
func TestCedictTable(t *testing.T) {
	checkTable(t, "CC-CEDICT", cedictTable, 50000)
	for _, l := range strings.Split(strings.TrimSuffix(cedictTable, "\n"), "\n") {
		if k := lineKey(l); len([]rune(k)) > maxCedictWord || !hasCJK(k) {
			t.Fatalf("headword %q: want 1 to %d Chinese characters", k, maxCedictWord)
		}
	}
	for word, want := range map[string]string{"退房": "hotel", "月相": "moon", "快递": "express"} {
		if ts := strings.Fields(tableLine(cedictTable, word)); !slices.Contains(ts, want) {
			t.Errorf("%s glosses %v, want %q among them", word, ts, want)
		}
	}
}

// Forward maximum matching finds the longest headword at each
// position and skips a character no headword starts with.
func TestCedictWords(t *testing.T) {
	var got []string
	cedictWords([]rune("查询快递单号"), func(_ int, w, _ string) { got = append(got, w) })
	if !slices.Contains(got, "快递") || !slices.Contains(got, "查询") {
		t.Errorf("words of 查询快递单号 = %v, want 查询 and 快递 among them", got)
	}
	var runs []string
	cjkRuns("list 订单 and 退款!", func(r []rune) { runs = append(runs, string(r)) })
	if !slices.Equal(runs, []string{"订单", "退款"}) {
		t.Errorf("CJK runs = %v", runs)
	}
}

// A Chinese query word the hand-written lexicon lacks reaches the
// English tool its dictionary glosses name, below the query's own words;
// without the dictionary it finds nothing.
func TestCedictReachesEnglishTools(t *testing.T) {
	ix := Build([]Doc{
		{Name: "get_moon_phase", Description: "Get the phase of the moon on a date.", Parameters: emptySchema},
		{Name: "check_out_guest", Description: "Check a guest out of their hotel room and close the bill.", Parameters: emptySchema},
		{Name: "list_rooms", Description: "List the rooms of a property.", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{"月相": "get_moon_phase", "退房": "check_out_guest"} {
		if zhToEn[q] != nil {
			t.Fatalf("%s is in the hand-written lexicon; the test needs a word only the dictionary has", q)
		}
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
	weightCedict = 0
	defer func() { weightCedict = 0.5 }()
	if got := hitNames(ix.Keyword("月相", 5, nil)); len(got) != 0 {
		t.Errorf("without the dictionary Keyword(月相) = %v, want nothing", got)
	}
}
