package tests

// The MCP scale matrix: every operation of the engine, over HTTP and
// NATS, on a registry of about 1,000 tools (the imported MCP corpus) and
// about 10,000 (the corpus plus generated servers). It records the
// largest reply and stored event of each operation with its latencies,
// and fails when one passes its stated bound (docs/semantics.md#limits).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// scaleSize is one registry of the matrix.
type scaleSize struct {
	name string
	// servers × perServer generated tools are added to the MCP corpus.
	servers, perServer int
	// rounds is how many turns each transport runs (latency samples).
	rounds int
}

// scale1k is the matrix's first registry: the MCP corpus as imported
// (1,095 tools with the built-in ones); mcp_scale10k_test.go adds 100
// generated servers of 90 tools (10,095 tools).
var scale1k = scaleSize{name: "1k", rounds: 4}

// Bounds of the matrix, as docs/semantics.md#limits states them.
const (
	// scaleReplyBound bounds every reply except the parts listed below.
	scaleReplyBound = 64 << 10
	// scaleEventBound bounds every stored event but a checkpoint's.
	scaleEventBound = 4 << 10
	// scaleLoaded is how many tools the first turn loads by name.
	scaleLoaded = 10
	// historyBound bounds a history page: it ends once its entries pass
	// wire.MaxHistoryPageBytes, and an entry lists at most 64 names a
	// list.
	historyBound = wire.MaxHistoryPageBytes + 64<<10
)

// scaleOp is what the matrix saw of one operation.
type scaleOp struct {
	largest int    // bytes of the largest reply, past what its bound excludes
	full    int    // bytes of the largest reply, rendering included
	bound   int    // its bound
	what    string // what the bound covers
	lat     []time.Duration
}

// scaleStats collects the matrix's figures; safe for concurrent use.
type scaleStats struct {
	mu     sync.Mutex
	ops    map[string]*scaleOp
	events map[string]int // largest stored event by type
}

func newScaleStats() *scaleStats {
	return &scaleStats{ops: map[string]*scaleOp{}, events: map[string]int{}}
}

// record notes one reply of op: n bytes (past the parts its bound
// excludes, see boundOf), after d.
func (s *scaleStats) record(op string, n, full int, bound int, what string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[op]
	if o == nil {
		o = &scaleOp{bound: bound, what: what}
		s.ops[op] = o
	}
	o.largest, o.full = max(o.largest, n), max(o.full, full)
	o.lat = append(o.lat, d)
}

// event notes a stored event of type typ of n bytes.
func (s *scaleStats) event(typ string, n int) {
	s.mu.Lock()
	s.events[typ] = max(s.events[typ], n)
	s.mu.Unlock()
}

// p99 is the 99th percentile of ds (nearest rank).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}

// check fails t for every operation past its bound, and logs the table.
func (s *scaleStats) check(t testing.TB, size scaleSize, tools int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.ops))
	for n := range s.ops {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "scale matrix %s (%d tools): operation | largest reply (bytes, bounded part) | bound | largest whole reply | p99 | samples\n", size.name, tools)
	for _, n := range names {
		o := s.ops[n]
		fmt.Fprintf(&b, "  %-34s %9d  %9d %-28s %9d %9s %3d\n", n, o.largest, o.bound, o.what, o.full, p99(o.lat).Round(100*time.Microsecond), len(o.lat))
		if o.largest > o.bound {
			t.Errorf("%s: largest reply %d bytes (%s), over its bound %d", n, o.largest, o.what, o.bound)
		}
	}
	types := make([]string, 0, len(s.events))
	for n := range s.events {
		types = append(types, n)
	}
	sort.Strings(types)
	for _, typ := range types {
		bound := scaleEventBound
		if typ == string(events.TypeTurnEnded) || typ == string(events.TypeCheckpointRecorded) {
			bound = checkpoint.SizeBound(events.MaxListLen)
		}
		fmt.Fprintf(&b, "  event %-28s %9d  %9d\n", typ, s.events[typ], bound)
		if s.events[typ] > bound {
			t.Errorf("stored %s of %d bytes, over its bound %d", typ, s.events[typ], bound)
		}
	}
	t.Log(b.String())
	if dir := os.Getenv("SCALE_MATRIX_OUT"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "scale-"+size.name+".txt"), []byte(b.String()), 0o644)
	}
}

// scaleRegistry writes the registry of size: the MCP corpus, plus the
// generated servers, imported by the engine binary. It returns the file
// and its tool count.
func scaleRegistry(t *testing.T, size scaleSize) (string, int) {
	t.Helper()
	src := filepath.Join("..", "toolsearch", "searcheval", "testdata", "mcp")
	dir := t.TempDir()
	in := filepath.Join(dir, "mcp")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range size.servers {
		name, data := generatedServer(i, size.perServer)
		if err := os.WriteFile(filepath.Join(in, name+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "registry.json")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	imp := exec.CommandContext(ctx, engineBin, "registry", "import", in, "-o", out)
	var stderr bytes.Buffer
	imp.Stderr = &stderr
	if err := imp.Run(); err != nil {
		t.Fatalf("registry import: %v\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &reg); err != nil {
		t.Fatal(err)
	}
	t.Logf("registry %s: %d tools, %d bytes (%s)", size.name, len(reg.Tools), len(data), strings.TrimSpace(stderr.String()))
	return out, len(reg.Tools)
}

// Words of the generated servers: a business domain per server, and per
// tool a verb and an object of that domain.
var (
	genDomains = []string{"crm", "billing", "inventory", "helpdesk", "payroll", "analytics", "shipping", "marketing", "legal", "procurement"}
	genObjects = map[string][]string{
		"crm":         {"contact", "account", "lead", "opportunity", "activity", "note", "pipeline", "segment", "owner"},
		"billing":     {"invoice", "payment", "refund", "subscription", "plan", "coupon", "tax_rate", "credit_note", "dunning_run"},
		"inventory":   {"item", "warehouse", "stock_level", "transfer", "supplier", "batch", "bin", "count", "reorder_rule"},
		"helpdesk":    {"ticket", "macro", "agent", "queue", "sla_policy", "satisfaction_survey", "tag", "article", "escalation"},
		"payroll":     {"employee", "pay_run", "payslip", "deduction", "bonus", "timesheet", "leave_request", "bank_account", "tax_form"},
		"analytics":   {"dashboard", "report", "metric", "funnel", "cohort", "segment", "alert", "export_job", "annotation"},
		"shipping":    {"shipment", "parcel", "label", "carrier", "rate_quote", "pickup", "tracking_event", "return", "manifest"},
		"marketing":   {"campaign", "email_template", "audience", "landing_page", "ab_test", "form", "utm_link", "newsletter", "asset"},
		"legal":       {"contract", "clause", "matter", "signature_request", "nda", "policy", "retention_hold", "counterparty", "review"},
		"procurement": {"purchase_order", "requisition", "vendor", "quote_request", "receipt", "budget_line", "approval", "catalog_item", "spend_report"},
	}
	genVerbs = []struct{ verb, what string }{
		{"list", "Lists %ss of the %s workspace, newest first, with paging; filter by status, owner or a date range."},
		{"get", "Returns one %s of the %s workspace by id, with its fields, history and links to related records."},
		{"create", "Creates a %s in the %s workspace and returns it with its new id; fails when a required reference does not exist."},
		{"update", "Updates fields of a %s in the %s workspace; only the fields given change, and the response is the updated record."},
		{"delete", "Deletes a %s from the %s workspace; it moves to the trash for 30 days unless permanent is set."},
		{"search", "Searches %ss of the %s workspace by free text over names, descriptions and custom fields, ranked by relevance."},
		{"export", "Exports %ss of the %s workspace as CSV or JSON to a download URL that stays valid for one hour."},
		{"archive", "Archives a %s of the %s workspace: it stays readable but leaves the active lists and reports."},
		{"assign", "Assigns a %s of the %s workspace to a user or team, notifying them and recording the change in its history."},
		{"comment", "Adds a comment to a %s of the %s workspace, visible to everyone with access, with optional mentions."},
	}
)

// generatedServer returns the name and MCP tools file of generated server
// i with n tools (verbs × objects of its domain).
func generatedServer(i, n int) (string, []byte) {
	domain := genDomains[i%len(genDomains)]
	server := fmt.Sprintf("%s%02d", domain, i/len(genDomains))
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	var tools []tool
	objs := genObjects[domain]
	for k := 0; len(tools) < n; k++ {
		v := genVerbs[k%len(genVerbs)]
		obj := objs[(k/len(genVerbs))%len(objs)]
		name := v.verb + "_" + obj
		if k >= len(genVerbs)*len(objs) {
			name += fmt.Sprintf("_v%d", k/(len(genVerbs)*len(objs))+1)
		}
		props := map[string]any{
			"workspace_id": map[string]any{"type": "string", "description": "The " + domain + " workspace, e.g. ws_" + server},
		}
		required := []string{"workspace_id"}
		switch v.verb {
		case "list", "search", "export":
			props["status"] = map[string]any{"type": "string", "enum": []string{"open", "pending", "closed", "archived"}, "description": "Only " + obj + "s in this status"}
			props["page_size"] = map[string]any{"type": "integer", "minimum": 1, "maximum": 200, "description": "Results per page (default 50)"}
			props["cursor"] = map[string]any{"type": "string", "description": "Cursor of the next page, from the previous response"}
			if v.verb == "search" {
				props["query"] = map[string]any{"type": "string", "description": "Words to look for"}
				required = append(required, "query")
			}
			if v.verb == "export" {
				props["format"] = map[string]any{"type": "string", "enum": []string{"csv", "json"}}
			}
		case "create", "update":
			props["fields"] = map[string]any{"type": "object", "description": "Field values of the " + obj + ", by field key", "additionalProperties": true}
			props["notify"] = map[string]any{"type": "boolean", "description": "Notify the owner (default true)"}
			if v.verb == "update" {
				props[obj+"_id"] = map[string]any{"type": "string", "description": "Id of the " + obj}
				required = append(required, obj+"_id")
			}
			required = append(required, "fields")
		default:
			props[obj+"_id"] = map[string]any{"type": "string", "description": "Id of the " + obj}
			required = append(required, obj+"_id")
			switch v.verb {
			case "delete":
				props["permanent"] = map[string]any{"type": "boolean", "description": "Skip the trash"}
			case "assign":
				props["assignee"] = map[string]any{"type": "string", "description": "User or team id"}
				required = append(required, "assignee")
			case "comment":
				props["body"] = map[string]any{"type": "string", "description": "Comment text, Markdown"}
				props["mentions"] = map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "User ids to notify"}
				required = append(required, "body")
			}
		}
		desc := fmt.Sprintf(v.what, strings.ReplaceAll(obj, "_", " "), strings.ToUpper(domain[:1])+domain[1:]+" "+server[len(domain):])
		tools = append(tools, tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object", "properties": props, "required": required}})
	}
	data, _ := json.Marshal(map[string]any{"tools": tools})
	return server, data
}

// scaleTransport is one way to call the engine: the Go client over HTTP
// or over NATS, for the session's channel and the erase channel.
type scaleTransport struct {
	name     string
	web, ops *client.Client
}

// scaleTransports returns the HTTP and NATS clients of p.
func scaleTransports(t *testing.T, p *engineProc) []scaleTransport {
	t.Helper()
	nc, err := nats.Connect(p.NATSURL, p.natsAuth(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts := []client.Option{client.WithActor("scale"), client.WithTimeout(60 * time.Second)}
	return []scaleTransport{
		{"http", client.NewHTTP(p.HTTPURL, append(opts, client.WithChannel("web"))...), client.NewHTTP(p.HTTPURL, append(opts, client.WithChannel("ops"))...)},
		{"nats", client.NewNATS(nc, append(opts, client.WithChannel("web"))...), client.NewNATS(nc, append(opts, client.WithChannel("ops"))...)},
	}
}

// scaleCall calls op over tr with req, records its reply under name and
// decodes it into out (nil: not decoded). A view's rendering is outside
// its bound (see viewBounded).
func scaleCall(t *testing.T, s *scaleStats, tr scaleTransport, c *client.Client, name string, o wire.Operation, req, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var raw json.RawMessage
	start := time.Now()
	err := c.Do(ctx, o, req, &raw)
	d := time.Since(start)
	if err != nil {
		s.check(t, scaleSize{name: "so far"}, 0)
		t.Fatalf("%s over %s: %v (after %s)", name, tr.name, err, d.Round(time.Millisecond))
	}
	n, bound, what := boundOf(raw)
	if o.Name == wire.OpHistory.Name {
		bound = historyBound
	}
	s.record(name, n, len(raw), bound, what, d)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s over %s: decode reply: %v", name, tr.name, err)
		}
	}
}

// boundOf returns the bytes of a reply that count against its bound, the
// bound and what it covers: the whole reply, or a turn view's reply
// without its rendering (the provider tools array, which a native mode
// must fill with every tool of the turn; a backend holding it sends
// if_none_match and is not sent it again).
func boundOf(raw json.RawMessage) (int, int, string) {
	var v struct {
		Rendering json.RawMessage `json:"rendering"`
		View      *struct {
			Rendering json.RawMessage `json:"rendering"`
		} `json:"view"`
	}
	if json.Unmarshal(raw, &v) == nil {
		r := v.Rendering
		if v.View != nil {
			r = v.View.Rendering
		}
		if len(r) > 4 {
			return len(raw) - len(r), scaleReplyBound, "reply less its rendering"
		}
	}
	return len(raw), scaleReplyBound, "reply"
}

// scaleStream names the event stream holding a session and the
// session's subject in it: a layout of the store.
type scaleStream func(session string) (stream, subject string)

// oneStream is the layout of one event stream.
func oneStream(session string) (string, string) { return "TOOLS_EVENTS", "tools.events." + session }

// scaleEvents records the size of every event stored for session, read
// with batched direct gets (no consumer: a replicated stream's consumer
// may be moving between leaders) from the stream layout names; a session
// without events fails.
func scaleEvents(t *testing.T, s *scaleStats, p *engineProc, layout scaleStream, session string) {
	t.Helper()
	nc, err := nats.Connect(p.NATSURL, p.natsAuth(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	name, subject := layout(session)
	msgs := permDirectReadFrom(t, nc, name, subject)
	if len(msgs) == 0 {
		t.Fatalf("stream %s holds no event on %s", name, subject)
	}
	for _, m := range msgs {
		env, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("stored event of %s does not decode: %v", session, err)
		}
		s.event(string(env.Type), len(m.Data))
	}
}

// scaleLoadNames are the tools the first turn loads by name: the first
// deferred tools of the MCP corpus's github server.
var scaleLoadNames = []string{
	"mcp__github__add_issue_comment", "mcp__github__create_branch", "mcp__github__create_issue",
	"mcp__github__create_or_update_file", "mcp__github__create_pull_request", "mcp__github__fork_repository",
	"mcp__github__get_file_contents", "mcp__github__get_issue", "mcp__github__list_commits", "mcp__github__merge_pull_request",
}

// runScaleMatrix runs every operation on a registry of size, over both
// transports, and checks the bounds.
func runScaleMatrix(t *testing.T, size scaleSize) {
	reg, tools := scaleRegistry(t, size)
	dir := t.TempDir()
	// The registry is served from the KV bucket (seeded from the file), so
	// that a push reaches the engine.
	start := func() *engineProc { return startEngine(t, dir, "--registry-kv", "--registry", reg) }
	runScaleMatrixOn(t, size, reg, tools, start, oneStream)
}

// runScaleMatrixOn runs the matrix on the engine start starts (again
// after kill -9), serving reg (tools tools) from the registry bucket,
// on a store laid out as layout.
func runScaleMatrixOn(t *testing.T, size scaleSize, reg string, tools int, start func() *engineProc, layout scaleStream) {
	p := start()
	s := newScaleStats()
	trs := scaleTransports(t, p)
	for _, tr := range trs {
		scaleSession(t, s, tr, "scale-"+tr.name, size)
	}

	// Resume after kill -9 of the engine: each session gets its loaded
	// tools back.
	p.Kill()
	p = start()
	trs = scaleTransports(t, p)
	for _, tr := range trs {
		session := "scale-" + tr.name
		var r wire.ResumeReply
		scaleCall(t, s, tr, tr.web, "resume (after kill -9)", wire.OpResume, &wire.ResumeRequest{Session: session}, &r)
		if !r.Outcome.OK || len(r.Outcome.Restored) < scaleLoaded {
			t.Fatalf("%s: resume after kill -9 restored %v (%s), want the %d loaded tools", tr.name, r.Outcome.Restored, r.Outcome.Reason, scaleLoaded)
		}
		for _, n := range scaleLoadNames {
			if !slices.Contains(r.Outcome.Restored, n) {
				t.Fatalf("%s: resume after kill -9 did not restore %s: %v", tr.name, n, r.Outcome.Restored)
			}
		}
	}

	scaleInspector(t, s, p, "scale-http")
	scaleRegistryDiff(t, s, trs, p, reg)
	for _, tr := range trs {
		scaleEvents(t, s, p, layout, "scale-"+tr.name)
		scaleLifecycle(t, s, tr, "scale-"+tr.name)
	}
	s.check(t, size, tools)
}

// scaleSession runs the per-session operations on session over tr.
func scaleSession(t *testing.T, s *scaleStats, tr scaleTransport, session string, size scaleSize) {
	t.Helper()
	var ap wire.AppendReply
	scaleCall(t, s, tr, tr.web, "append", wire.OpAppend, &wire.AppendRequest{Session: session, Commands: []wire.Command{
		{"type": "ToolsToggled", "enabled": true}, {"type": "ToolDisabled", "name": "mcp__jira__*"}}}, &ap)
	scaleCall(t, s, tr, tr.web, "intent", wire.OpIntent, &wire.IntentRequest{Session: session, MinSeq: ap.LastSeq}, nil)
	for round := range size.rounds {
		for _, mode := range deferral.ProviderNames() {
			scaleCall(t, s, tr, tr.web, "resolve "+mode, wire.OpResolve, &wire.ResolveRequest{Session: session, Provider: mode}, nil)
		}
		var begin wire.TurnView
		scaleCall(t, s, tr, tr.web, "turn-begin", wire.OpBeginTurn, &wire.BeginTurnRequest{Session: session}, &begin)
		names := scaleLoadNames
		if round > 0 {
			names = []string{fmt.Sprintf("mcp__slack__slack_%s", []string{"list_channels", "post_message", "get_users", "add_reaction"}[round%4])}
		}
		in, _ := json.Marshal(map[string]any{"names": names})
		var d wire.DiscoverReply
		scaleCall(t, s, tr, tr.web, "turn-discover names", wire.OpDiscover, &wire.DiscoverRequest{Session: session, Input: in}, &d)
		if round == 0 && len(d.Loaded) != scaleLoaded {
			t.Fatalf("%s: discover by names loaded %v, want the %d names", tr.name, d.Loaded, scaleLoaded)
		}
		scaleCall(t, s, tr, tr.web, "turn-discover query", wire.OpDiscover, &wire.DiscoverRequest{Session: session,
			Input: json.RawMessage(`{"query":"send a message to a slack channel","max_results":2}`)}, nil)
		scaleCall(t, s, tr, tr.web, "turn-discover regex", wire.OpDiscover, &wire.DiscoverRequest{Session: session,
			Input: json.RawMessage(`{"regex":"^mcp__notion__","max_results":3}`)}, nil)
		for _, mode := range []string{"", "openai-engine"} {
			scaleCall(t, s, tr, tr.web, "turn-dispatch "+or(mode, "default"), wire.OpDispatch, &wire.DispatchRequest{Session: session, Provider: mode}, nil)
		}
		// A backend holding the turn's rendering is not sent it again.
		var held wire.TurnView
		scaleCall(t, s, tr, tr.web, "turn-dispatch if_none_match", wire.OpDispatch, &wire.DispatchRequest{Session: session, IfNoneMatch: begin.RenderingHash}, &held)
		if !held.RenderingUnchanged || len(held.Rendering) > 4 {
			t.Fatalf("%s: dispatch with the rendering's hash: unchanged %v, %d rendering bytes", tr.name, held.RenderingUnchanged, len(held.Rendering))
		}
		scaleCall(t, s, tr, tr.web, "turn-inspect", wire.OpInspect, &wire.TurnRequest{Session: session}, nil)
		var cc wire.CallCheckReply
		scaleCall(t, s, tr, tr.web, "turn-call-check", wire.OpCallCheck, &wire.CallCheckRequest{Session: session, Tool: scaleLoadNames[0]}, &cc)
		if !cc.Callable {
			t.Fatalf("%s: call-check of a loaded tool: %+v", tr.name, cc)
		}
		cc = wire.CallCheckReply{}
		scaleCall(t, s, tr, tr.web, "turn-call-check", wire.OpCallCheck, &wire.CallCheckRequest{Session: session, Tool: "mcp__asana__asana_get_task", Provider: "anthropic-engine"}, &cc)
		if cc.Callable || cc.Reason != wire.CallNotLoaded {
			t.Fatalf("%s: call-check of a deferred tool not loaded, engine-side request: %+v", tr.name, cc)
		}
		scaleCall(t, s, tr, tr.web, "turn-checkpoint", wire.OpCheckpoint, &wire.TurnRequest{Session: session}, nil)
		scaleCall(t, s, tr, tr.web, "turn-end", wire.OpEndTurn, &wire.TurnRequest{Session: session}, nil)
	}
	var h wire.History
	scaleCall(t, s, tr, tr.web, "history", wire.OpHistory, &wire.HistoryRequest{Session: session}, &h)
	for h.More {
		scaleCall(t, s, tr, tr.web, "history", wire.OpHistory, &wire.HistoryRequest{Session: session, AfterSeq: h.NextAfterSeq}, &h)
	}
	scaleCall(t, s, tr, tr.web, "explain", wire.OpExplain, &wire.ExplainRequest{Session: session, Tool: "mcp__jira__getJiraIssue"}, nil)
	batch := slices.Clone(scaleLoadNames)
	for i := 0; len(batch) < wire.MaxExplainBatch; i++ {
		batch = append(batch, fmt.Sprintf("mcp__slack__slack_%s", []string{"list_channels", "post_message", "get_users", "add_reaction"}[i%4]))
	}
	scaleCall(t, s, tr, tr.web, "explain-batch", wire.OpExplainBatch, &wire.ExplainBatchRequest{Session: session, Tools: slices.Compact(batch)}, nil)
}

// scaleRegistryDiff diffs, over each transport, a candidate that changes
// one deferred tool's description, and pushes it with the CLI (engine
// registry push, which asks a serving engine for the diff first), until
// the engine serves it.
func scaleRegistryDiff(t *testing.T, s *scaleStats, trs []scaleTransport, p *engineProc, reg string) {
	t.Helper()
	data, err := os.ReadFile(reg)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	file["version"] = "scale-candidate"
	for _, x := range file["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == "mcp__asana__asana_get_task" {
			m["description"] = m["description"].(string) + " Changed."
		}
	}
	cand, _ := json.Marshal(file)
	for _, tr := range trs {
		var imp wire.RegistryImpact
		scaleCall(t, s, tr, tr.web, "registry-diff", wire.OpRegistryDiff, &wire.RegistryDiffRequest{Registry: cand}, &imp)
		if len(imp.Diff.Changed) != 1 {
			t.Fatalf("%s: registry diff %+v, want the one changed tool", tr.name, imp.Diff)
		}
	}
	file2 := filepath.Join(t.TempDir(), "candidate.json")
	if err := os.WriteFile(file2, cand, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := pushRegistry(file2, p.NATSURL, p.DataDir)
	if err != nil {
		t.Fatalf("registry push of %d bytes: %v\n%s", len(cand), err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		var info wire.RegistryInfo
		err := trs[0].web.Do(ctx, wire.OpRegistry, &wire.RegistryRequest{ToolLimit: 1}, &info)
		if err == nil && info.Version == "scale-candidate" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the engine does not serve the pushed registry: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.record("registry-push (CLI, until served)", len(out), len(out), scaleReplyBound, "CLI output", time.Since(start))
}

// scaleLifecycle compacts, deletes and erases over tr: session is
// compacted then erased, and a second session is deleted.
func scaleLifecycle(t *testing.T, s *scaleStats, tr scaleTransport, session string) {
	t.Helper()
	scaleCall(t, s, tr, tr.ops, "session-compact", wire.OpCompact, &wire.CompactRequest{Session: session, Reason: "scale"}, nil)
	other := session + "-del"
	scaleCall(t, s, tr, tr.web, "append", wire.OpAppend, &wire.AppendRequest{Session: other, Commands: []wire.Command{{"type": "ToolsToggled", "enabled": true}}}, nil)
	scaleCall(t, s, tr, tr.web, "session-delete", wire.OpDelete, &wire.DeleteRequest{Session: other, Reason: "scale"}, nil)
	scaleCall(t, s, tr, tr.ops, "session-erase", wire.OpDelete, &wire.DeleteRequest{Session: session, Reason: "scale", Erase: true}, nil)
}

// scaleInspector opens the inspector on session in headless chromium and
// records each API request the page sent, by path, from the browser's
// resource timing.
func scaleInspector(t *testing.T, s *scaleStats, p *engineProc, session string) {
	t.Helper()
	inspRequire(t)
	browser, consoleErrs := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, 120*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session="+session)); err != nil {
		t.Fatal(err)
	}
	inspWait(t, ctx, consoleErrs, "open", "document.body.dataset.ready", session+"@now")
	type entry struct {
		Path  string  `json:"path"`
		Bytes int     `json:"bytes"`
		Ms    float64 `json:"ms"`
	}
	got := inspEval[[]entry](t, ctx, `performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname.startsWith("/v1/")).map((e) => ({path: new URL(e.name).pathname, bytes: e.decodedBodySize, ms: e.duration}))`)
	if len(got) == 0 {
		t.Fatal("the inspector sent no API request")
	}
	for _, e := range got {
		op := "inspector GET " + strings.Replace(e.Path, "/"+session, "/{session}", 1)
		bound := scaleReplyBound
		if strings.HasSuffix(e.Path, "/history") {
			bound = historyBound
		}
		s.record(op, e.Bytes, e.Bytes, bound, "reply", time.Duration(e.Ms*float64(time.Millisecond)))
	}
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
