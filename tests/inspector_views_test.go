package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// inspFitJS reports every place the timeline card does not fit: the
// card's scroll box scrolling sideways, a cell whose content is cut, or a
// cell showing an unrendered object.
const inspFitJS = `(() => {
  const bad = [];
  const box = document.querySelector("#timeline-card .scroll");
  if (box.scrollWidth > box.clientWidth + 1) bad.push("scroll box " + box.scrollWidth + " > " + box.clientWidth);
  const card = document.querySelector("#timeline-card");
  if (card.scrollWidth > card.clientWidth + 1) bad.push("card " + card.scrollWidth + " > " + card.clientWidth);
  for (const td of document.querySelectorAll("#timeline tbody td")) {
    const row = td.parentElement.dataset.seq;
    if (td.scrollWidth > td.clientWidth + 1) bad.push("seq " + row + " cell " + td.className + " " + td.scrollWidth + " > " + td.clientWidth);
    if (td.textContent.includes("[object")) bad.push("seq " + row + " cell " + td.className + " shows " + td.textContent.slice(0, 60));
  }
  return bad;
})()`

// The timeline fits its card at a wide and a narrow window (long
// gained/lost lists wrap or fold, the prefix column is not cut);
// DeferredLoaded rows say what was loaded; not-loaded deferred tools say
// "catalog"; and the turns card lists each turn's provider requests with
// the tools prefix hash, marking each prompt-cache break with its cause
// and the event responsible (from the history's prefix data).
func TestInspectorTimelineAndTurns(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := p.Client("web-channel-with-a-long-name")
	on := true
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const sid = "turns"
	_, err := c.Append(ctx, sid, nil, events.ToolsToggled{Enabled: &on})
	must("enable", err)
	// Every tool off and on again: rows with long lost and gained lists.
	off := false
	_, err = c.Append(ctx, sid, nil, events.ToolsToggled{Enabled: &off})
	must("all off", err)
	_, err = c.Append(ctx, sid, nil, events.ToolsToggled{Enabled: &on})
	must("all on", err)
	// Turn 1: the frozen array, then a tool_search load: in the engine's
	// catalog mode, which the turn records and the page shows, a cache
	// break of cause discovery inside the turn (in the default native
	// mode a discovery changes nothing of the cached prefix).
	_, err = c.BeginTurn(ctx, wire.BeginTurnRequest{Session: sid, Provider: "anthropic-engine"})
	must("begin 1", err)
	_, err = c.Discover(ctx, sid, "", "playwright_browser", "enter_plan_mode", "exit_plan_mode")
	must("discover", err)
	_, err = c.EndTurn(ctx, sid)
	must("end 1", err)
	// Between the turns the intent changes: turn 2's first request breaks
	// the cache, caused by the ToolDisabled.
	noBash, err := c.Append(ctx, sid, nil, events.ToolDisabled{Name: "bash"})
	must("disable bash", err)
	_, err = c.BeginTurn(ctx, wire.BeginTurnRequest{Session: sid, Provider: "anthropic-engine"})
	must("begin 2", err)
	end2, err := c.EndTurn(ctx, sid)
	must("end 2", err)
	// Turn 3 with nothing changed: its request keeps the prefix.
	_, err = c.BeginTurn(ctx, wire.BeginTurnRequest{Session: sid, Provider: "anthropic-engine"})
	must("begin 3", err)
	_, err = c.Intent(ctx, sid, end2.Seq)
	must("intent", err)
	hist, err := c.History(ctx, wire.HistoryRequest{Session: sid})
	must("history", err)
	var starts, loads []wire.HistoryEntryOf[*service.Command]
	for _, e := range hist.Entries {
		switch e.Type {
		case "TurnStarted":
			starts = append(starts, e)
		case "DeferredLoaded":
			loads = append(loads, e)
		}
	}
	if len(starts) != 3 || len(loads) != 1 {
		t.Fatalf("history: %d turns, %d loads", len(starts), len(loads))
	}

	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session="+sid)); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", sid+"@now")

	// DeferredLoaded says what was loaded; the catalog's tools say "catalog".
	loadedRow := text(t, bctx, fmt.Sprintf(`#timeline tbody tr[data-seq="%d"]`, loads[0].Seq))
	if !strings.Contains(loadedRow, "loaded playwright_browser, enter_plan_mode, exit_plan_mode in turn 1") {
		t.Errorf("DeferredLoaded row: %q", loadedRow)
	}
	if cat := text(t, bctx, `#catalog li[data-tool="send_message"]`); !strings.Contains(cat, "catalog") {
		t.Errorf("catalog entry of send_message: %q, want it to say catalog", cat)
	}

	// The timeline fits, wide and narrow.
	for _, w := range []int64{1400, 1000} {
		if _, err := chromedp.Run(bctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		if bad := inspEval[[]string](t, bctx, inspFitJS); len(bad) > 0 {
			inspShot(t, bctx, fmt.Sprintf("timeline-%d", w))
			t.Errorf("at %d px the timeline does not fit its card: %q", w, bad)
		}
		inspShot(t, bctx, fmt.Sprintf("timeline-%d", w))
	}
	// The rows that lost and gained every tool fold the list past 8 names.
	for i, want := range map[int]string{1: "more lost", 2: "more gained"} {
		if row := text(t, bctx, fmt.Sprintf(`#timeline tbody tr[data-seq="%d"] td.delta`, hist.Entries[i].Seq)); !strings.Contains(row, want) {
			t.Errorf("a long gained/lost list is not folded (%s): %q", want, row)
		}
	}

	// The turns card: one block per turn, requests with prefix hashes.
	type req struct {
		Turn, Req, Seq, Prefix, Hit, Cause string
	}
	reqs := inspEval[[]req](t, bctx, `Array.from(document.querySelectorAll("#turns tr.request")).map((r) => ({Turn: r.dataset.turn, Req: r.dataset.req, Seq: r.dataset.seq, Prefix: r.dataset.prefix, Hit: r.dataset.hit, Cause: r.dataset.cause}))`)
	seq := func(n uint64) string { return strconv.FormatUint(n, 10) }
	want := []req{
		{"1", "1", seq(starts[0].Seq), starts[0].PrefixHash, "first", ""},
		{"1", "2", seq(loads[0].Seq), loads[0].PrefixHash, "break", "discovery"},
		{"2", "1", seq(starts[1].Seq), starts[1].PrefixHash, "break", "intent"},
		{"3", "1", seq(starts[2].Seq), starts[2].PrefixHash, "hit", ""},
	}
	if !slices.Equal(reqs, want) {
		t.Errorf("provider requests:\n got %+v\nwant %+v", reqs, want)
	}
	if starts[1].PrefixHash == loads[0].PrefixHash || starts[2].PrefixHash != starts[1].PrefixHash {
		t.Fatalf("the history's prefixes do not show the breaks this test expects: %+v", hist.Entries)
	}
	turn2 := text(t, bctx, `#turns tr.request[data-turn="2"]`)
	if !strings.Contains(turn2, "cache break") || !strings.Contains(turn2, "intent seq "+seq(noBash.LastSeq)+" ToolDisabled") ||
		!strings.Contains(turn2, starts[1].PrefixHash[:12]) {
		t.Errorf("turn 2's request: %q, want a cache break caused by seq %d ToolDisabled, prefix %s", turn2, noBash.LastSeq, starts[1].PrefixHash[:12])
	}
	if head := text(t, bctx, `#turns tr.turn-head[data-turn="3"]`); !strings.Contains(head, "(open)") || !strings.Contains(head, "web-channel-with-a-long-name") {
		t.Errorf("turn 3 head: %q", head)
	}
	if errs := consoleErrs(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// The session list is paged in the page, 50 a page, with controls;
// the filter pages its matches; a linked session opens on its page.
func TestInspectorSessionPages(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := p.Client("web")
	on := true
	var last wire.AppendReply
	var err error
	for i := range 120 {
		if last, err = c.Append(ctx, fmt.Sprintf("s%03d", i), nil, events.ToolsToggled{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Intent(ctx, "s119", last.LastSeq); err != nil {
		t.Fatal(err)
	}
	// The session list is the projection's: wait until it has all 120.
	var all []string
	for len(all) != 120 {
		if all, err = c.Sessions(ctx); err != nil {
			t.Fatalf("sessions: %v", err)
		}
		if len(all) != 120 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
	defer bcancel()
	shown := func() []string {
		return inspEval[[]string](t, bctx, `Array.from(document.querySelectorAll("#sessions li[data-session]")).map((n) => n.dataset.session)`)
	}
	label := func() string { return text(t, bctx, "#page-label") }
	// A deep link to a session of page 3 opens page 3.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session="+all[110])); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", all[110]+"@now")
	if got := shown(); !slices.Equal(got, all[100:]) || label() != "101–120 of 120" {
		t.Fatalf("linked session's page: %q (%s), want %q", got, label(), all[100:])
	}
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/")); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", "none")
	inspWait(t, bctx, consoleErrs, "first page", `String(document.querySelectorAll("#sessions li[data-session]").length)`, "50")
	if got := shown(); !slices.Equal(got, all[:50]) || label() != "1–50 of 120" || text(t, bctx, "#session-count") != "120" {
		t.Fatalf("page 1: %q (%s)", got, label())
	}
	if !inspEval[bool](t, bctx, `document.querySelector("#page-prev").disabled && !document.querySelector("#page-next").disabled`) {
		t.Errorf("page 1: prev should be disabled, next enabled")
	}
	for page, want := range [][]string{all[50:100], all[100:]} {
		if _, err := chromedp.Run(bctx, chromedp.Click(chromedp.CSS("#page-next"))); err != nil {
			t.Fatal(err)
		}
		if got := shown(); !slices.Equal(got, want) {
			t.Fatalf("page %d: %q, want %q", page+2, got, want)
		}
	}
	if label() != "101–120 of 120" || !inspEval[bool](t, bctx, `document.querySelector("#page-next").disabled`) {
		t.Errorf("last page: %s, next should be disabled", label())
	}
	if _, err := chromedp.Run(bctx, chromedp.Click(chromedp.CSS("#page-prev"))); err != nil {
		t.Fatal(err)
	}
	if got := shown(); !slices.Equal(got, all[50:100]) {
		t.Fatalf("back to page 2: %q", got)
	}
	inspShot(t, bctx, "sessions-page2")
	// The filter pages its matches: "s1" matches s001, s010-s019, s100-s119 (31).
	if _, err := chromedp.Run(bctx, chromedp.SendKeys(chromedp.CSS("#session-filter"), "s1")); err != nil {
		t.Fatal(err)
	}
	var match []string
	for _, s := range all {
		if strings.Contains(s, "s1") {
			match = append(match, s)
		}
	}
	if got := shown(); !slices.Equal(got, match) || !inspEval[bool](t, bctx, `document.querySelector("#session-pager").hidden`) {
		t.Fatalf("filtered: %q, want %q on one page without the pager", got, match)
	}
	inspShot(t, bctx, "sessions-filtered")
}

// inspPolicyRegistry writes the default registry with a channel policy:
// every channel is denied kill_shell, "public" is denied bash and gets at
// most "network" tools, and bash asks everywhere else.
func inspPolicyRegistry(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "resolver", "default_registry.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = "builtin-pol"
	doc["channel_policy"] = map[string]any{
		"version": "pol-7",
		"channels": map[string]any{
			"public": map[string]any{"deny": []string{"bash"}, "max_permission": "network"},
			"*":      map[string]any{"deny": []string{"kill_shell"}},
		},
		"decisions": []any{map[string]any{"tool": "bash", "decision": "ask"}},
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The channel policy card shows the registry's policy version, the
// tools the policy withholds with the rule of each (the "*" rule outside
// a turn, the turn's channel inside one), the recorded answers, and a
// call-check form whose decision and rule are the call-check operation's.
func TestInspectorPolicyCard(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir(), "--registry", inspPolicyRegistry(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tui := p.Client("tui")
	on := true
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	res, err := tui.Append(ctx, "pol", nil, events.ToolsToggled{Enabled: &on})
	must("enable", err)
	_, err = tui.Intent(ctx, "pol", res.LastSeq)
	must("intent", err)

	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
	defer bcancel()
	type withheld struct{ Tool, Rule string }
	readWithheld := func() []withheld {
		inspWait(t, bctx, consoleErrs, "withheld rules", `String(document.querySelectorAll("#withheld li[data-state=pending]").length)`, "0")
		return inspEval[[]withheld](t, bctx, `Array.from(document.querySelectorAll("#withheld li[data-tool]")).map((n) => ({Tool: n.dataset.tool, Rule: n.dataset.rule}))`)
	}
	session := "pol"
	open := func(want string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session="+session)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", want)
	}
	open("pol@now")
	if v := text(t, bctx, "#policy-version"); v != "pol-7" {
		t.Errorf("policy version %q, want pol-7", v)
	}
	if got := readWithheld(); !slices.Equal(got, []withheld{{"kill_shell", "channel-deny:*:kill_shell@pol-7"}}) {
		t.Errorf("withheld outside a turn: %+v", got)
	}
	check := func(tool string) (decision, rule, callable string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.CSS("#callcheck-tool"), tool),
			chromedp.Click(chromedp.CSS("#callcheck-submit"))); err != nil {
			t.Fatal(err)
		}
		inspWait(t, bctx, consoleErrs, "call-check "+tool, `(document.querySelector("#callcheck-result").dataset.decision ? "done" : "")`, "done")
		return inspEval[string](t, bctx, `document.querySelector("#callcheck-result").dataset.decision`),
			inspEval[string](t, bctx, `document.querySelector("#callcheck-result").dataset.rule || ""`),
			inspEval[string](t, bctx, `document.querySelector("#callcheck-result").dataset.callable || ""`)
	}
	// Outside a turn the form says call-check needs one (one message, in
	// the card, not the page's error).
	if d, _, _ := check("bash"); d != "error" || !strings.Contains(text(t, bctx, "#callcheck-result"), "No open turn") {
		t.Errorf("call-check outside a turn: %s %q", d, text(t, bctx, "#callcheck-result"))
	}
	if e := inspEval[string](t, bctx, `document.body.dataset.error || ""`); e != "" {
		t.Errorf("a call-check refusal set the page error: %q", e)
	}

	// A turn begun on "tui": bash asks, kill_shell is denied.
	_, err = tui.BeginTurn(ctx, wire.BeginTurnRequest{Session: "pol"})
	must("begin on tui", err)
	open("pol@now")
	if ch := text(t, bctx, "#policy-channel"); !strings.Contains(ch, "channel tui") {
		t.Errorf("policy card channel: %q", ch)
	}
	gc := p.GoClient("tui")
	for _, tc := range []struct{ tool, decision, callable string }{
		{"bash", "ask", "false"}, {"read_file", "allow", "true"}, {"kill_shell", "deny", "false"},
	} {
		d, rule, callable := check(tc.tool)
		cc, err := gc.TurnCallCheck(ctx, client.CallCheckRequest{Session: "pol", Tool: tc.tool})
		must("call-check "+tc.tool, err)
		if d != tc.decision || callable != tc.callable || rule != cc.Rule || d != cc.Decision {
			t.Errorf("call-check %s on the page: %s %s (callable %s); want %s (callable %s), the API says %s %s", tc.tool, d, rule, callable, tc.decision, tc.callable, cc.Decision, cc.Rule)
		}
	}
	// The user allows bash for the session: the answer is listed and the
	// call-check now allows it, naming the answer.
	grant, err := tui.Append(ctx, "pol", nil, events.PermissionGranted{Tool: "bash", Scope: events.ScopeSession, By: "alice"})
	must("grant", err)
	inspWait(t, bctx, consoleErrs, "live refresh", "document.body.dataset.seq", strconv.FormatUint(grant.LastSeq, 10))
	inspWait(t, bctx, consoleErrs, "live refresh", "document.body.dataset.ready", "pol@now")
	if g := text(t, bctx, "#grants"); !strings.Contains(g, "bash") || !strings.Contains(g, "allowed by alice") || !strings.Contains(g, "seq "+strconv.FormatUint(grant.LastSeq, 10)) {
		t.Errorf("recorded answers: %q", g)
	}
	if d, rule, callable := check("bash"); d != "allow" || callable != "true" || rule != fmt.Sprintf("granted:session:alice@%d", grant.LastSeq) {
		t.Errorf("call-check bash after the answer: %s %s callable %s", d, rule, callable)
	}
	inspShot(t, bctx, "policy-tui")

	// A turn begun on "public" (another session: turn.end fails on a
	// registry with a channel policy today, see the report): its frozen
	// view withholds bash and every tool above "network", each with its
	// rule.
	pub := p.Client("public")
	res, err = pub.Append(ctx, "pol-public", nil, events.ToolsToggled{Enabled: &on})
	must("enable on public", err)
	_, err = pub.BeginTurn(ctx, wire.BeginTurnRequest{Session: "pol-public"})
	must("begin on public", err)
	session = "pol-public"
	open("pol-public@now")
	got := readWithheld()
	rules := map[string]string{}
	for _, w := range got {
		rules[w.Tool] = w.Rule
	}
	if rules["bash"] != "channel-deny:public:bash@pol-7" || rules["write_file"] != "channel-max-permission:public:network@pol-7" ||
		rules["kill_shell"] != "channel-max-permission:public:network@pol-7" && rules["kill_shell"] != "channel-deny:*:kill_shell@pol-7" {
		t.Errorf("withheld on public: %+v", got)
	}
	if _, ok := rules["read_file"]; ok || len(got) < 5 {
		t.Errorf("withheld on public: %+v", got)
	}
	if ch := text(t, bctx, "#policy-channel"); !strings.Contains(ch, "channel public") {
		t.Errorf("policy card channel: %q", ch)
	}
	inspShot(t, bctx, "policy-public")
	// The browser logs the call-check outside a turn (409, no_turn) itself.
	errs := slices.DeleteFunc(consoleErrs(), func(m string) bool { return strings.Contains(m, "409 (Conflict)") })
	if len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// One error state. A bad session id shows a single message (no
// per-tool rows, no "live" badge); when the engine stops answering the
// page shows the "offline" badge and still one message.
func TestInspectorErrorAndOffline(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := p.Client("web")
	on := true
	res, err := c.Append(ctx, "fine", nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Intent(ctx, "fine", res.LastSeq); err != nil {
		t.Fatal(err)
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
	defer bcancel()
	type errView struct {
		Errors  int    `json:"errors"`  // visible error boxes
		Message string `json:"message"` // their text
		Rows    int    `json:"rows"`    // explain and timeline rows shown
		Mode    string `json:"mode"`
		Offline bool   `json:"offline"`
	}
	const viewJS = `(() => {
	  const vis = (n) => n && !n.closest("[hidden]");
	  const errs = Array.from(document.querySelectorAll(".error, .loss")).filter(vis);
	  return {errors: errs.length, message: errs.map((n) => n.textContent).join(" | "),
	    rows: Array.from(document.querySelectorAll("#explain tbody tr, #timeline tbody tr")).filter(vis).length,
	    mode: document.querySelector("#mode").textContent, offline: vis(document.querySelector("#conn"))};
	})()`
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=not%20a%20valid%20id")); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "bad id", "document.body.dataset.ready", "not a valid id@error")
	v := inspEval[errView](t, bctx, viewJS)
	if v.Errors != 1 || v.Rows != 0 || v.Mode == "live" || v.Offline || !strings.Contains(v.Message, "session") {
		t.Errorf("bad session id: %+v; want one message naming the session, no rows, not live, not offline", v)
	}
	inspShot(t, bctx, "error-bad-id")

	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=fine")); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "fine", "document.body.dataset.ready", "fine@now")
	p.Kill()
	// The next poll finds the engine gone.
	inspWait(t, bctx, consoleErrs, "offline badge", `document.body.dataset.offline || ""`, "true")
	inspWait(t, bctx, consoleErrs, "offline view", "document.body.dataset.ready", "fine@error")
	v = inspEval[errView](t, bctx, viewJS)
	if v.Errors != 1 || !v.Offline || v.Mode != "offline" || !strings.Contains(v.Message, "does not answer") {
		t.Errorf("engine stopped: %+v; want the offline badge and one message", v)
	}
	inspShot(t, bctx, "offline")

	// The engine answers again (same data, same address): the badge goes
	// and the view loads again by itself.
	addr := strings.TrimPrefix(p.HTTPURL, "http://")
	startEngine(t, p.DataDir, "--http", addr)
	inspWait(t, bctx, consoleErrs, "back online", `document.body.dataset.offline || "online"`, "online")
	inspWait(t, bctx, consoleErrs, "reloaded", "document.body.dataset.ready", "fine@now")
	v = inspEval[errView](t, bctx, viewJS)
	if v.Errors != 0 || v.Offline || v.Mode != "live" || v.Rows != 1 {
		t.Errorf("engine back: %+v; want no message, no badge, the live view with its one event", v)
	}
}
