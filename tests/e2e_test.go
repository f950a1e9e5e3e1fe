package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// e2eCtx is a context bounded by 30s and by the test.
func e2eCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// e2eCLIJSON runs `engine ARGS... --json` against p and decodes stdout into out.
func e2eCLIJSON(t *testing.T, p *engineProc, out any, args ...string) {
	t.Helper()
	if err := e2eCLITry(t, p, out, args...); err != nil {
		t.Fatal(err)
	}
}

// e2eCLITry is e2eCLIJSON returning the failure instead.
func e2eCLITry(t *testing.T, p *engineProc, out any, args ...string) error {
	t.Helper()
	s, err := p.runCLI(t, append(args, "--json")...)
	if err != nil {
		return fmt.Errorf("engine %s --json: %v", strings.Join(args, " "), err)
	}
	if err := json.NewDecoder(strings.NewReader(s)).Decode(out); err != nil {
		return fmt.Errorf("engine %s --json: decode: %v\n%s", strings.Join(args, " "), err, s)
	}
	return nil
}

// e2eWireBody writes an event body by hand, from docs/wire-format.md only:
// one msgpack map with the string keys id, session, channel, actor,
// time_ms, v, type and data (a map of the type's payload keys). The map's
// key order is Go's (random): the page says order does not matter.
func e2eWireBody(t *testing.T, id, session, channel, actor, typ string, data map[string]any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(map[string]any{
		"id":      id,
		"session": session,
		"channel": channel,
		"actor":   actor,
		"time_ms": time.Now().UnixMilli(),
		"v":       2,
		"type":    typ,
		"data":    data,
	})
	if err != nil {
		t.Fatalf("msgpack: %v", err)
	}
	return b
}

// e2ePublisher is a plain JetStream publisher of the documented wire
// format: subject tools.events.<session>, headers Nats-Msg-Id (the
// event's ULID) and Nats-Expected-Last-Subject-Sequence (the last
// sequence it saw on the subject, 0 for none).
type e2ePublisher struct {
	js   jetstream.JetStream
	last map[string]uint64
}

func newE2EPublisher(t *testing.T, nc *nats.Conn) *e2ePublisher {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &e2ePublisher{js: js, last: map[string]uint64{}}
}

// publishRaw publishes body with the given id and expected sequence (no
// expected-sequence header when expected < 0) and returns the ack or the
// error.
func (w *e2ePublisher) publishRaw(ctx context.Context, session, id string, expected int64, body []byte) (*jetstream.PubAck, error) {
	msg := nats.NewMsg("tools.events." + session)
	msg.Data = body
	msg.Header.Set("Nats-Msg-Id", id)
	if expected >= 0 {
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatInt(expected, 10))
	}
	return w.js.PublishMsg(ctx, msg)
}

// publish publishes one event body with a fresh ULID after the last
// sequence this publisher saw on the session, and returns its sequence.
func (w *e2ePublisher) publish(t *testing.T, session string, body func(id string) []byte) uint64 {
	t.Helper()
	id := ulid.Make().String()
	ack, err := w.publishRaw(e2eCtx(t), session, id, int64(w.last[session]), body(id))
	if err != nil {
		t.Fatalf("publish to tools.events.%s after seq %d: %v", session, w.last[session], err)
	}
	if ack.Stream != "TOOLS_EVENTS" || ack.Duplicate {
		t.Fatalf("publish ack %+v, want a new message in TOOLS_EVENTS", ack)
	}
	w.last[session] = ack.Sequence
	return ack.Sequence
}

// e2eSameView strips what differs between two sessions with the same intent.
func e2eSameView(v wire.TurnView) wire.TurnView {
	v.Session, v.Seq = "", 0
	v.Rendering = nil
	return v
}

func e2eSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// e2eNATSResolve sends the micro request tools.api.<channel>.session.resolve
// with a JSON body and returns the reply as a view and the raw rendering.
func e2eNATSResolve(t *testing.T, nc *nats.Conn, channel, session, provider string) (wire.TurnView, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"session": session, "provider": provider})
	msg, err := nc.RequestWithContext(e2eCtx(t), "tools.api."+channel+".session.resolve", body)
	if err != nil {
		t.Fatalf("request tools.api.%s.session.resolve: %v", channel, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("resolve %s over NATS: error %s %s: %s", session, code, msg.Header.Get("Nats-Service-Error"), msg.Data)
	}
	var raw struct {
		Rendering json.RawMessage `json:"rendering"`
	}
	var v wire.TurnView
	if err := json.Unmarshal(msg.Data, &v); err != nil {
		t.Fatalf("decode NATS resolve reply: %v\n%s", err, msg.Data)
	}
	if err := json.Unmarshal(msg.Data, &raw); err != nil {
		t.Fatal(err)
	}
	return v, raw.Rendering
}

// `engine serve` (embedded JetStream by default) gives the
// same resolution for one intent written three ways — the CLI, the HTTP
// API and a plain JetStream publisher of the documented wire format — and
// reads it back the same three ways (CLI, HTTP, NATS micro). an
// undecodable message on a session subject is kept, reported by history,
// and does not stop the session from resolving.
func TestSameResolutionEachWay(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := e2eCtx(t)
	on := true

	// (a) The CLI.
	var lastCLI uint64
	for _, change := range [][]string{{"enable"}, {"web-search", "on"}, {"disable", "bash"}} {
		var res wire.AppendReply
		e2eCLIJSON(t, p, &res, append([]string{"emit", "s-cli"}, change...)...)
		if res.LastSeq == 0 || res.LastSeq <= lastCLI {
			t.Fatalf("engine emit s-cli %v: %+v, want a new sequence after %d", change, res, lastCLI)
		}
		lastCLI = res.LastSeq
	}

	// (b) The HTTP API client.
	hc := p.Client("web")
	httpRes, err := hc.Append(ctx, "s-http", nil,
		events.ToolsToggled{Enabled: &on}, events.WebSearchSet{Enabled: &on}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if httpRes.LastSeq-httpRes.FirstSeq != 2 {
		t.Fatalf("HTTP append: %+v, want 3 events", httpRes)
	}

	// (c) A plain JetStream publisher writing msgpack by hand, with an
	// undecodable message in the middle.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	w := newE2EPublisher(t, nc)
	s := "s-js"
	w.publish(t, s, func(id string) []byte {
		return e2eWireBody(t, id, s, "backend", "svc:test", "ToolsToggled", map[string]any{"enabled": true})
	})
	garbageID := ulid.Make().String()
	garbage := []byte("\xc1 this is not msgpack")
	ack, err := w.publishRaw(ctx, s, garbageID, int64(w.last[s]), garbage)
	if err != nil {
		t.Fatalf("publish undecodable message: %v", err)
	}
	badSeq := ack.Sequence
	// A retry of that publish (same Nats-Msg-Id) is stored once. With
	// the same, now stale, expected sequence the server refuses it with
	// 10071 (nats-server checks the sequence before the id); without the
	// header it acknowledges the original as a duplicate.
	var apiErr *jetstream.APIError
	if retry, err := w.publishRaw(ctx, s, garbageID, int64(w.last[s]), garbage); !(err == nil && retry.Duplicate && retry.Sequence == badSeq) &&
		!(errors.As(err, &apiErr) && apiErr.ErrorCode == 10071) {
		t.Fatalf("retried publish of %s with its headers: ack %+v, %v; want a duplicate of seq %d or error 10071", garbageID, retry, err, badSeq)
	}
	if retry, err := w.publishRaw(ctx, s, garbageID, -1, garbage); err != nil || !retry.Duplicate || retry.Sequence != badSeq {
		t.Fatalf("retried publish of %s without expected sequence: ack %+v, %v; want a duplicate of seq %d", garbageID, retry, err, badSeq)
	}
	w.last[s] = badSeq
	// A stale expected sequence is refused (error 10071), nothing stored.
	_, err = w.publishRaw(ctx, s, ulid.Make().String(), int64(badSeq-1), e2eWireBody(t, ulid.Make().String(), s, "backend", "svc:test", "ToolDisabled", map[string]any{"name": "grep"}))
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10071 {
		t.Fatalf("publish with stale expected sequence %d: %v, want JetStream error 10071", badSeq-1, err)
	}
	w.publish(t, s, func(id string) []byte {
		return e2eWireBody(t, id, s, "backend", "svc:test", "WebSearchSet", map[string]any{"enabled": true})
	})
	lastJS := w.publish(t, s, func(id string) []byte {
		return e2eWireBody(t, id, s, "backend", "svc:test", "ToolDisabled", map[string]any{"name": "bash"})
	})

	// Read-your-writes on every session before the reads that take no
	// min_seq (the CLI's resolve).
	for sess, seq := range map[string]uint64{"s-cli": lastCLI, "s-http": httpRes.LastSeq, "s-js": lastJS} {
		v, err := hc.Intent(ctx, sess, seq)
		if err != nil {
			t.Fatalf("intent %s min_seq %d: %v", sess, seq, err)
		}
		want := intent.Intent{Enabled: &on, WebSearch: &on, Disabled: []string{"bash"}}
		if !reflect.DeepEqual(v.Intent, want) || v.Seq != seq || v.Events != 3 {
			t.Fatalf("intent of %s: %+v, want %+v at seq %d with 3 events", sess, v, want, seq)
		}
		if wantSkipped := map[bool]uint64{true: 1}[sess == "s-js"]; v.Skipped != wantSkipped {
			t.Fatalf("intent of %s: %d skipped events, want %d", sess, v.Skipped, wantSkipped)
		}
	}

	// DEFAULT_TOOLS minus bash, web_search appended; the four
	// deferred defaults go to the catalog.
	wantProvider := []string{"read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "bash_output", "kill_shell",
		"tool_search", "todo_write", "ask_user", "spawn_agent", "web_fetch", "notebook_edit", "diagnostics", "list_sessions", "web_search"}
	wantCatalog := []string{"playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}

	for _, provider := range []string{"anthropic-engine", "openai-engine"} {
		t.Run(provider, func(t *testing.T) {
			var ref wire.TurnView
			var refRendering []byte
			for _, sess := range []string{"s-cli", "s-http", "s-js"} {
				hv, err := hc.Resolve(ctx, wire.ResolveRequest{Session: sess, Provider: provider})
				if err != nil {
					t.Fatalf("HTTP resolve %s: %v", sess, err)
				}
				nv, nrend := e2eNATSResolve(t, nc, "web", sess, provider)
				var cv wire.TurnView
				e2eCLIJSON(t, p, &cv, "resolve", sess, "--provider", provider)
				crend, err := p.runCLI(t, "resolve", sess, "--provider", provider, "--render")
				if err != nil {
					t.Fatal(err)
				}
				cliRendering := []byte(strings.TrimSuffix(crend, "\n"))
				var compact bytes.Buffer
				if err := json.Compact(&compact, cv.Rendering); err != nil {
					t.Fatalf("CLI --json rendering: %v", err)
				}

				if !slices.Equal(hv.Provider, wantProvider) || !slices.Equal(hv.Catalog, wantCatalog) {
					t.Fatalf("%s: provider %v catalog %v, want %v and %v", sess, hv.Provider, hv.Catalog, wantProvider, wantCatalog)
				}
				if hv.RenderedFor != provider || hv.PrefixHash != e2eSHA(hv.Rendering) || hv.ContractHash == "" {
					t.Fatalf("%s: rendered_for %q prefix %s (sha256 of rendering %s) contract %q", sess, hv.RenderedFor, hv.PrefixHash, e2eSHA(hv.Rendering), hv.ContractHash)
				}
				for way, r := range map[string][]byte{"NATS micro": nrend, "engine resolve --render": cliRendering, "engine resolve --json (compacted)": compact.Bytes()} {
					if !bytes.Equal(r, hv.Rendering) {
						t.Fatalf("%s: rendering by %s differs from HTTP:\n%s\n%s", sess, way, r, hv.Rendering)
					}
				}
				for way, v := range map[string]wire.TurnView{"NATS micro": nv, "engine resolve --json": cv} {
					if !reflect.DeepEqual(e2eSameView(v), e2eSameView(hv)) || v.Session != sess || v.Seq != hv.Seq {
						t.Fatalf("%s: view by %s differs from HTTP:\n%+v\n%+v", sess, way, v, hv)
					}
				}
				if ref.ContractHash == "" {
					ref, refRendering = hv, hv.Rendering
					continue
				}
				if !bytes.Equal(hv.Rendering, refRendering) {
					t.Fatalf("%s: rendering differs from s-cli's:\n%s\n%s", sess, hv.Rendering, refRendering)
				}
				if !reflect.DeepEqual(e2eSameView(hv), e2eSameView(ref)) {
					t.Fatalf("%s: view differs from s-cli's:\n%+v\n%+v", sess, hv, ref)
				}
			}
		})
	}

	// Every event records the channel it was written on.
	for sess, ch := range map[string]string{"s-cli": "cli", "s-http": "web", "s-js": "backend"} {
		h, err := hc.History(ctx, wire.HistoryRequest{Session: sess})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h.Entries {
			if e.Error == "" && e.Channel != ch {
				t.Fatalf("%s seq %d: channel %q, want %q", sess, e.Seq, e.Channel, ch)
			}
		}
	}

	// The history reports the skipped message at its sequence, and
	// the events after it still applied.
	var h wire.HistoryOf[*service.Command]
	e2eCLIJSON(t, p, &h, "history", s)
	if len(h.Entries) != 4 {
		t.Fatalf("history of %s: %d entries, want 4: %+v", s, len(h.Entries), h.Entries)
	}
	bad := h.Entries[1]
	if bad.Seq != badSeq || bad.Error == "" || bad.Payload != nil {
		t.Fatalf("history entry 2: %+v, want seq %d skipped with an error", bad, badSeq)
	}
	if !reflect.DeepEqual(bad.Intent, h.Entries[0].Intent) || len(bad.Gained)+len(bad.Lost) != 0 || bad.PrefixChanged {
		t.Fatalf("skipped entry changed the session: %+v after %+v", bad, h.Entries[0])
	}
	if h.State.Skipped != 1 || h.State.Events != 3 || h.State.Seq != lastJS {
		t.Fatalf("history state %+v, want 3 events and 1 skipped up to seq %d", h.State, lastJS)
	}
	table, err := p.runCLI(t, "history", s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, fmt.Sprintf("\n%d ", badSeq)) || !strings.Contains(table, "SKIPPED: ") {
		t.Fatalf("engine history %s does not show seq %d as skipped:\n%s", s, badSeq, table)
	}
}

// e2eHistEntry is what TestExplainAndHistoryUntil expects of the timeline
// after event number n (the stream sequence, on a fresh engine).
type e2eHistEntry struct {
	typ          string
	intent       intent.Intent
	gained, lost []string
}

func e2eBool(b bool) *bool { return &b }

// Explain names the rule and the event responsible, and history
// --until N / TIME replays exactly the first events, with the intent and
// the tool-set diff computed by hand below.
func TestExplainAndHistoryUntil(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := e2eCtx(t)
	c := p.Client("tui")
	const s = "audit-1"

	// Events, one append each; on a fresh engine the stream sequence is
	// the event's number.
	cmds := []events.Payload{
		events.ToolsToggled{Enabled: e2eBool(true)},              // 1
		events.PresetChosen{Preset: "research"},                  // 2
		events.ToolDisabled{Name: "web_fetch"},                   // 3
		events.WebSearchSet{Enabled: e2eBool(false)},             // 4
		events.PresetChosen{Preset: ""},                          // 5
		events.ToolDisabled{Name: "bash"},                        // 6
		events.WebSearchSet{Enabled: e2eBool(true)},              // 7
		events.ToolEnabled{Name: "web_fetch"},                    // 8
		events.ToolsPicked{Names: []string{"grep", "read_file"}}, // 9
		events.ToolsPicked{},                                     // 10
	}
	// By hand. Before event 1 the empty intent follows DEFAULT_TOOLS, so
	// {enabled:true} changes nothing in the set. notInResearch: the
	// DEFAULT_TOOLS the research preset lacks, in DEFAULT_TOOLS order.
	notInResearch := []string{"write_file", "edit_file", "bash", "bash_output", "kill_shell", "spawn_agent", "notebook_edit",
		"diagnostics", "list_sessions", "playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}
	unpicked := []string{"write_file", "edit_file", "list_dir", "glob", "bash_output", "kill_shell", "tool_search", "todo_write", "ask_user",
		"spawn_agent", "web_fetch", "notebook_edit", "diagnostics", "list_sessions", "playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}
	want := []e2eHistEntry{
		{"ToolsToggled", intent.Intent{Enabled: e2eBool(true)}, nil, nil},
		{"PresetChosen", intent.Intent{Enabled: e2eBool(true), Preset: "research"}, []string{"web_search", "image_describe", "memory_read"}, notInResearch},
		{"ToolDisabled", intent.Intent{Enabled: e2eBool(true), Preset: "research", Disabled: []string{"web_fetch"}}, nil, []string{"web_fetch"}},
		// web_search=false adds and removes nothing: research keeps it.
		{"WebSearchSet", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(false), Preset: "research", Disabled: []string{"web_fetch"}}, nil, nil},
		{"PresetChosen", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(false), Disabled: []string{"web_fetch"}}, notInResearch, []string{"web_search", "image_describe", "memory_read"}},
		{"ToolDisabled", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(false), Disabled: []string{"bash", "web_fetch"}}, nil, []string{"bash"}},
		{"WebSearchSet", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(true), Disabled: []string{"bash", "web_fetch"}}, []string{"web_search"}, nil},
		{"ToolEnabled", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(true), Disabled: []string{"bash"}}, []string{"web_fetch"}, nil},
		// picked [grep, read_file] + web_search (overlay): the 18 other
		// tools of event 8's set are lost, in that set's order.
		{"ToolsPicked", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(true), Disabled: []string{"bash"}, Picked: []string{"grep", "read_file"}}, nil, unpicked},
		// Unpicking gives them back (DEFAULT_TOOLS order).
		{"ToolsPicked", intent.Intent{Enabled: e2eBool(true), WebSearch: e2eBool(true), Disabled: []string{"bash"}}, unpicked, nil},
	}

	for i, cmd := range cmds {
		res, err := c.Append(ctx, s, nil, cmd)
		if err != nil {
			t.Fatalf("event %d %T: %v", i+1, cmd, err)
		}
		if res.FirstSeq != uint64(i+1) || res.LastSeq != uint64(i+1) {
			t.Fatalf("event %d %T stored at %d..%d, want seq %d (fresh engine)", i+1, cmd, res.FirstSeq, res.LastSeq, i+1)
		}
	}

	var full wire.HistoryOf[*service.Command]
	e2eCLIJSON(t, p, &full, "history", s)
	if len(full.Entries) != len(cmds) {
		t.Fatalf("history: %d entries, want %d", len(full.Entries), len(cmds))
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 9, 10} {
		var h wire.HistoryOf[*service.Command]
		e2eCLIJSON(t, p, &h, "history", s, "--until", strconv.Itoa(n))
		if len(h.Entries) != n {
			t.Fatalf("history --until %d: %d entries, want %d", n, len(h.Entries), n)
		}
		for i, e := range h.Entries {
			w := want[i]
			if e.Seq != uint64(i+1) || e.Type != w.typ || e.Channel != "tui" || e.Error != "" {
				t.Fatalf("--until %d entry %d: seq %d type %s channel %q error %q, want seq %d %s on tui", n, i+1, e.Seq, e.Type, e.Channel, e.Error, i+1, w.typ)
			}
			if !reflect.DeepEqual(e.Intent, w.intent) {
				t.Fatalf("--until %d entry %d: intent %+v, want %+v", n, i+1, e.Intent, w.intent)
			}
			if !slices.Equal(e.Gained, w.gained) || !slices.Equal(e.Lost, w.lost) {
				t.Fatalf("--until %d entry %d (%s): gained %v lost %v, want gained %v lost %v", n, i+1, e.Type, e.Gained, e.Lost, w.gained, w.lost)
			}
			if wantChanged := len(w.gained)+len(w.lost) > 0; e.PrefixChanged != wantChanged {
				t.Fatalf("--until %d entry %d: prefix_changed %v, want %v", n, i+1, e.PrefixChanged, wantChanged)
			}
			if e.PrefixChanged && e.Cause != "intent" {
				t.Fatalf("--until %d entry %d: cause %q, want intent", n, i+1, e.Cause)
			}
			if !reflect.DeepEqual(e, full.Entries[i]) {
				t.Fatalf("--until %d entry %d differs from the full history:\n%+v\n%+v", n, i+1, e, full.Entries[i])
			}
		}
		if !reflect.DeepEqual(h.State.Intent, want[n-1].intent) || h.State.Seq != uint64(n) || h.State.Events != uint64(n) {
			t.Fatalf("history --until %d: state %+v, want intent %+v at seq %d", n, h.State, want[n-1].intent, n)
		}
	}

	// --until an RFC 3339 time between events 4 and 5: exactly 4 entries.
	t4, t5 := full.Entries[3].Time, full.Entries[4].Time
	if !t5.After(t4) {
		t.Fatalf("events 4 and 5 stored at %s and %s: no time between them", t4, t5)
	}
	cut := t4.Add(t5.Sub(t4) / 2)
	for _, form := range []string{cut.UTC().Format(time.RFC3339Nano), cut.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano)} {
		var h wire.HistoryOf[*service.Command]
		if err := e2eCLITry(t, p, &h, "history", s, "--until", form); err != nil {
			t.Error(err)
			continue
		}
		if len(h.Entries) != 4 || !reflect.DeepEqual(h.State.Intent, want[3].intent) {
			t.Errorf("history --until %s (between %s and %s): %d entries, intent %+v; want 4 and %+v", form, t4, t5, len(h.Entries), h.State.Intent, want[3].intent)
		}
	}
	// A time before the first event: nothing.
	var none wire.HistoryOf[*service.Command]
	if err := e2eCLITry(t, p, &none, "history", s, "--until", full.Entries[0].Time.Add(-time.Millisecond).UTC().Format(time.RFC3339Nano)); err != nil {
		t.Error(err)
	} else if len(none.Entries) != 0 || none.State.Seq != 0 {
		t.Errorf("history --until before the first event: %+v", none)
	}

	// explain, by hand: (until, tool) → included, rule, and the event
	// after which the tool's outcome or rule last changed.
	type ex struct {
		until    string
		tool     string
		included bool
		rule     string
		seq      uint64 // 0: no event
		typ      string
	}
	cutForm := cut.UTC().Format(time.RFC3339Nano)
	cases := []ex{
		// At seq 2 (research preset): in by the preset, out of it.
		{"2", "grep", true, "preset:research", 2, "PresetChosen"},
		{"2", "bash", false, "not-in-preset:research", 2, "PresetChosen"},
		{"2", "web_fetch", true, "preset:research", 2, "PresetChosen"},
		// At seq 4: web_fetch disabled by hand (event 3), web_search kept by
		// the preset (web_search=false removes nothing), bash still
		// excluded by the preset.
		{"4", "web_fetch", false, "disabled-by-session", 3, "ToolDisabled"},
		{"4", "web_search", true, "preset:research", 2, "PresetChosen"},
		{"4", "bash", false, "not-in-preset:research", 2, "PresetChosen"},
		{cutForm, "web_fetch", false, "disabled-by-session", 3, "ToolDisabled"},
		{cutForm, "memory_read", true, "preset:research", 2, "PresetChosen"},
		// At seq 6: unsetting the preset (event 5) brought the defaults back.
		{"6", "read_file", true, "default-tools", 5, "PresetChosen"},
		{"6", "bash", false, "disabled-by-session", 6, "ToolDisabled"},
		{"6", "memory_read", false, "not-in-defaults", 5, "PresetChosen"},
		{"6", "web_search", false, "web_search=false", 5, "PresetChosen"},
		// At seq 8: web_search added by the overlay (event 7), web_fetch back.
		{"8", "web_search", true, "web_search-overlay", 7, "WebSearchSet"},
		{"8", "web_fetch", true, "default-tools", 8, "ToolEnabled"},
		// At seq 9: the picked list decides (event 9).
		{"9", "grep", true, "picked", 9, "ToolsPicked"},
		{"9", "list_dir", false, "not-picked", 9, "ToolsPicked"},
		{"9", "web_search", true, "web_search-overlay", 7, "WebSearchSet"},
		// Now (seq 10): unpicking (event 10) brought the defaults back, in
		// which bash is still disabled (event 6 set the name, event 10 made
		// it the deciding rule again).
		{"", "bash", false, "disabled-by-session", 10, "ToolsPicked"},
		{"", "send_message", true, "default-tools", 10, "ToolsPicked"},
		{"", "image_generate", false, "not-in-defaults", 10, "ToolsPicked"},
		{"", "no_such_tool", false, "unknown-tool", 0, ""},
	}
	for _, tc := range cases {
		args := []string{"explain", s, tc.tool}
		if tc.until != "" {
			args = append(args, "--until", tc.until)
		}
		var r wire.Explanation
		if err := e2eCLITry(t, p, &r, args...); err != nil {
			t.Error(err)
			continue
		}
		got := fmt.Sprintf("included=%v rule=%s", r.Included, r.Rule)
		wantS := fmt.Sprintf("included=%v rule=%s", tc.included, tc.rule)
		if r.Event != nil {
			got += fmt.Sprintf(" event=%d/%s", r.Event.Seq, r.Event.Type)
		}
		if tc.seq != 0 {
			wantS += fmt.Sprintf(" event=%d/%s", tc.seq, tc.typ)
		}
		if got != wantS || r.Tool != tc.tool || r.Detail == "" {
			t.Errorf("engine %s: %s (%q), want %s", strings.Join(args, " "), got, r.Detail, wantS)
		}
		if r.Event != nil && (r.Event.Channel != "tui" || r.Event.ID != full.Entries[r.Event.Seq-1].ID) {
			t.Errorf("engine %s: event %+v, want the stored event %+v", strings.Join(args, " "), r.Event, full.Entries[r.Event.Seq-1].EventRef)
		}
		wantSeq := uint64(len(cmds))
		switch tc.until {
		case "":
		case cutForm:
			wantSeq = 4
		default:
			wantSeq, _ = strconv.ParseUint(tc.until, 10, 64)
		}
		if r.Seq != wantSeq {
			t.Errorf("engine %s: explained seq %d, want %d", strings.Join(args, " "), r.Seq, wantSeq)
		}
	}
	// The table form names the rule and the event too.
	out, err := p.runCLI(t, "explain", s, "bash")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "bash") || !strings.Contains(out, "OUT (rule disabled-by-session)") || !strings.Contains(out, "seq 10 ToolsPicked") {
		t.Errorf("engine explain %s bash:\n%s", s, out)
	}
}
