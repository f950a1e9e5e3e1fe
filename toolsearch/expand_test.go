package toolsearch

import (
	"slices"
	"strings"
	"testing"
)

var emptySchema = []byte(`{"type":"object"}`)

// firstHit returns the name of the best hit of query, or "".
func firstHit(ix *Index, query string) string {
	hs := ix.Keyword(query, 5, nil)
	if len(hs) == 0 {
		return ""
	}
	return hs[0].Name
}

// Failure list: a compound word a description writes in camelCase
// ("JavaScript", "PostgreSQL", "PromQL", "ConfigMap") is findable as one
// word, as its parts, and written apart in the query ("postgre sql",
// "config map": the joined form of neighbouring query words).
func TestCompoundWordsFindable(t *testing.T) {
	ix := Build([]Doc{
		{Name: "run_script", Description: "Run a JavaScript snippet in the page.", Parameters: emptySchema},
		{Name: "pg_query", Description: "Query a PostgreSQL database.", Parameters: emptySchema},
		{Name: "metrics_query", Description: "Evaluate a PromQL expression.", Parameters: emptySchema},
		{Name: "get_config", Description: "Read a ConfigMap.", Parameters: emptySchema},
		{Name: "list_maps", Description: "List the maps of a game.", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{
		"javascript": "run_script", "JavaScript": "run_script", "java script": "run_script",
		"postgresql": "pg_query", "PostgreSQL": "pg_query", "postgre sql": "pg_query",
		"promql": "metrics_query", "prom ql": "metrics_query",
		"configmap": "get_config", "ConfigMap": "get_config", "config map": "get_config",
	} {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
}

// Failure list: stemming does not mangle brand words: YouTube and
// iPhone are found under every spelling a request uses, and a shorter
// word their stems could be mistaken for ("tub", "phon") does not find
// them.
func TestBrandWordsNotMangled(t *testing.T) {
	ix := Build([]Doc{
		{Name: "upload_video", Description: "Upload a video to YouTube.", Parameters: emptySchema},
		{Name: "find_device", Description: "Locate a lost iPhone.", Parameters: emptySchema},
		{Name: "bath", Description: "Fill the tub.", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{
		"youtube": "upload_video", "YouTube": "upload_video", "Youtube": "upload_video", "YOUTUBE": "upload_video", "youtube videos": "upload_video",
		"iphone": "find_device", "iPhone": "find_device", "IPHONE": "find_device", "iphones": "find_device",
		"tub": "bath",
	} {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
	for _, w := range []string{"tube", "phone"} {
		if got := Terms(w); !slices.Equal(got, []string{w}) {
			t.Errorf("Terms(%q) = %q, want it whole", w, got)
		}
	}
	if got := hitNames(ix.Keyword("tub", 5, nil)); slices.Contains(got, "upload_video") {
		t.Errorf("Keyword(tub) = %v: YouTube was cut to tub", got)
	}
}

// Failure list: full-width Latin is normalised in queries and in
// tool text alike, and a one-character CJK query finds the tools whose
// text holds that character, the ones whose bigrams hold it too.
func TestFullWidthAndOneCharCJK(t *testing.T) {
	ix := Build([]Doc{
		{Name: "gh_search", Description: "Search GitHub code.", Parameters: emptySchema},
		{Name: "wide_name", Description: "Ｌｉｓｔ ｔｈｅ ｂｕｃｋｅｔｓ.", Parameters: emptySchema},
		{Name: "weather", Description: "查询城市天气。", Parameters: emptySchema},
		{Name: "send", Description: "发送消息。", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{
		"ｇｉｔｈｕｂ": "gh_search", "ＧｉｔＨｕｂ ｃｏｄｅ": "gh_search", "buckets": "wide_name",
		"天": "weather", "查": "weather", "消": "send", "天气": "weather",
	} {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
}

// A word a query word brings in counts at most
// the query word's own idf, so a rare synonym does not rank its tool above
// the tools that use the word asked for.
func TestExpansionCappedAtQueryWordIDF(t *testing.T) {
	docs := []Doc{{Name: "z_delete_record", Description: "Delete a record.", Parameters: emptySchema}}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		docs = append(docs, Doc{Name: "remove_" + n, Description: "Remove the " + n + " item.", Parameters: emptySchema})
	}
	docs = append(docs, Doc{Name: "other", Description: "Unrelated.", Parameters: emptySchema})
	ix := Build(docs, nil)
	got := hitNames(ix.Keyword("remove", 20, nil))
	if len(got) != 9 || got[len(got)-1] != "z_delete_record" {
		t.Errorf("Keyword(remove) = %v, want the eight remove_ tools, then z_delete_record", got)
	}
	expandCap = false
	defer func() { expandCap = true }()
	if got := firstHit(ix, "remove"); got != "z_delete_record" {
		t.Errorf("without the cap Keyword(remove) first = %q; want z_delete_record (the case the cap exists for)", got)
	}
}

// A query word the index lacks, and that no lexicon or WordNet
// reaches, finds the index's words it begins; a word of fewer than
// minPrefix letters does not.
func TestPrefixFallback(t *testing.T) {
	ix := Build([]Doc{
		{Name: "dash", Description: "Open a Grafana dashboard.", Parameters: emptySchema},
		{Name: "cart", Description: "Show the shopping cart.", Parameters: emptySchema},
	}, nil)
	if got := firstHit(ix, "grafan dashboards"); got != "dash" {
		t.Errorf("Keyword(grafan dashboards) first = %q, want dash", got)
	}
	if got := hitNames(ix.Keyword("grafan", 5, nil)); !slices.Equal(got, []string{"dash"}) {
		t.Errorf("Keyword(grafan) = %v, want [dash]", got)
	}
	if got := hitNames(ix.Keyword("ca", 5, nil)); len(got) != 0 {
		t.Errorf("Keyword(ca) = %v, want nothing", got)
	}
}

// A query word finds a tool
// whose own word WordNet relates to it from the tool's side ("lock" is a
// kind of "fasten"; fasten's line does not name lock), below a literal
// match.
func TestWordNetReverse(t *testing.T) {
	ix := Build([]Doc{
		{Name: "a_open_door", Description: "Open the front door.", Parameters: emptySchema},
		{Name: "b_lock_door", Description: "Lock the front door.", Parameters: emptySchema},
	}, nil)
	if got := firstHit(ix, "fasten the door"); got != "b_lock_door" {
		t.Errorf("Keyword(fasten the door) first = %q, want b_lock_door", got)
	}
	if !slices.Contains(ix.rev["fasten"], ix.dict["lock"]) {
		t.Errorf("rev[fasten] = %v lacks lock", ix.rev["fasten"])
	}
	for range 10 {
		if a, b := ix.Keyword("fasten the door", 5, nil), ix.Keyword("fasten the door", 5, nil); !slices.Equal(a, b) {
			t.Fatalf("fasten the door: %v then %v", a, b)
		}
	}
}

// A Chinese query reaches a tool described in
// English, and an English word a tool described in Chinese, through the
// Chinese–English lexicon; without it neither is found.
func TestChineseEnglishLexicon(t *testing.T) {
	ix := Build([]Doc{
		{Name: "send_sms", Description: "Send an SMS to a phone number.", Parameters: emptySchema},
		{Name: "list_files", Description: "List the files of a folder.", Parameters: emptySchema},
		{Name: "createApproval", Description: "发起一个新的审批实例。", Parameters: emptySchema},
	}, nil)
	cases := map[string]string{"发送短信": "send_sms", "列出文件": "list_files", "approval": "createApproval", "github 文件": "list_files"}
	for q, want := range cases {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
	weightZh, weightCedict = 0, 0
	defer func() { weightZh, weightCedict = 0.5, 0.5 }()
	if got := hitNames(ix.Keyword("发送短信", 5, nil)); slices.Contains(got, "send_sms") {
		t.Errorf("without the lexicon and the dictionary Keyword(发送短信) = %v, want no send_sms", got)
	}
}

// Neighbouring query words that spell a WordNet verb of
// two or three words ("call off", "get rid of", "look up") bring in its
// synonyms, so a phrasal request finds the tool of the one-word verb.
func TestWordNetCollocations(t *testing.T) {
	ix := Build([]Doc{
		{Name: "a_create_meeting", Description: "Create a meeting.", Parameters: emptySchema},
		{Name: "z_cancel_meeting", Description: "Cancel a meeting.", Parameters: emptySchema},
		{Name: "a_add_background", Description: "Add a background to an image.", Parameters: emptySchema},
		{Name: "z_remove_background", Description: "Remove the background of an image.", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{"call off the meeting": "z_cancel_meeting", "get rid of the background": "z_remove_background"} {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
	if !strings.Contains(wordnetLine("_calloff"), "cancel") {
		t.Errorf("table line _calloff = %q, want cancel among its synonyms", wordnetLine("_calloff"))
	}
	collocScale = 0
	defer func() { collocScale = 2 }()
	if got := firstHit(ix, "call off the meeting"); got != "a_create_meeting" {
		t.Errorf("without collocations Keyword(call off the meeting) first = %q; want the tie broken by name (a_create_meeting)", got)
	}
}

// A plural of three letters the stemmer leaves alone finds its singular:
// "ads" finds the ad break, "vms" the VM; a three-letter word the index
// holds as written ("dns") keeps its meaning.
func TestShortPluralFindsSingular(t *testing.T) {
	ix := Build([]Doc{
		{Name: "start_commercial", Description: "Start an ad break on the channel.", Parameters: emptySchema},
		{Name: "list_guests", Description: "List the VM and container guests.", Parameters: emptySchema},
		{Name: "set_dns", Description: "Set the DNS servers.", Parameters: emptySchema},
		{Name: "list_dn", Description: "List distinguished names (DN).", Parameters: emptySchema},
	}, nil)
	for q, want := range map[string]string{"run ads": "start_commercial", "vms": "list_guests", "dns": "set_dns"} {
		if got := firstHit(ix, q); got != want {
			t.Errorf("Keyword(%q) first = %q, want %s", q, got, want)
		}
	}
}
