package toolsearch

import (
	"slices"
	"testing"
)

// The words of one derivational family share a
// family key, so a request in another word class finds the tool; short
// words and different families stay apart.
func TestDerivationalFamilies(t *testing.T) {
	same := [][]string{
		{"notify", "notification", "notifications"},
		{"translate", "translation", "translating"},
		{"manage", "manager", "management"},
		{"remind", "reminder"},
		{"schedule", "scheduler"},
		{"compress", "compression"},
	}
	for _, g := range same {
		k := familyKey(Terms(g[0])[0])
		for _, w := range g[1:] {
			if got := familyKey(Terms(w)[0]); got != k {
				t.Errorf("familyKey(%s) = %q, familyKey(%s) = %q; want one family", g[0], k, w, got)
			}
		}
	}
	apart := [][2]string{{"user", "use"}, {"order", "ordinal"}, {"server", "service"}, {"note", "notify"}, {"pay", "payment"}}
	for _, p := range apart {
		if a, b := familyKey(Terms(p[0])[0]), familyKey(Terms(p[1])[0]); a == b {
			t.Errorf("familyKey(%s) = familyKey(%s) = %q; want them apart", p[0], p[1], a)
		}
	}
	obj := []byte(`{"type":"object"}`)
	ix := Build([]Doc{
		{Name: "send_push", Description: "Notify a user's devices.", Parameters: obj},
		{Name: "list_users", Description: "List the users.", Parameters: obj},
		{Name: "deepl_translate", Description: "Translate text.", Parameters: obj},
	}, nil)
	for q, want := range map[string]string{"push notification to a user": "send_push", "a translation of this paragraph": "deepl_translate"} {
		if got := hitNames(ix.Keyword(q, 5, nil)); len(got) == 0 || got[0] != want {
			t.Errorf("Keyword(%q) = %v, want %s first", q, got, want)
		}
	}
	// The literal form outranks a family member of the same strength.
	ix = Build([]Doc{
		{Name: "a_notify", Description: "Notify.", Parameters: obj},
		{Name: "b_notification", Description: "Notification.", Parameters: obj},
	}, nil)
	if got := hitNames(ix.Keyword("notification", 5, nil)); !slices.Equal(got, []string{"b_notification", "a_notify"}) {
		t.Errorf("Keyword(notification) = %v, want [b_notification a_notify]", got)
	}
}
