package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
)

// The read-only auditor created durable consumers (the durable
// flag is in the request body, out of reach of subject permissions) until
// the account's limit: 997, then `engine tail` failed with 10026 and the
// server grew 57 MB. Under the deploy configuration it creates no consumer
// of any kind, durable or ephemeral, by any create subject; it still reads
// the whole log by batched direct gets; and `engine tail` and the engine's
// own feed keep working.
func TestAttackAuditorCannotCreateConsumers(t *testing.T) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	auditor := permConnect(t, p.NATSURL, "auditor", pw["auditor"])
	admin := natstest.Connect(t, p.NATSURL, nats.UserInfo("admin", pw["admin"].password))
	adminJS, err := njs.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	consumers := func() int {
		t.Helper()
		s, err := adminJS.Stream(ctx, "TOOLS_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Consumers
	}
	before := consumers()

	start := time.Now()
	const attempts = 25
	for i := range attempts {
		name := fmt.Sprintf("audit-copy-%d", i)
		durable, _ := json.Marshal(map[string]any{"stream_name": "TOOLS_EVENTS", "config": map[string]any{
			"durable_name": name, "name": name, "deliver_policy": "all", "ack_policy": "none", "filter_subject": "tools.events.>"}})
		for _, subj := range []string{
			"$JS.API.CONSUMER.CREATE.TOOLS_EVENTS." + name + ".tools.events.>", // how the red team did it
			"$JS.API.CONSUMER.CREATE.TOOLS_EVENTS." + name,
			"$JS.API.CONSUMER.DURABLE.CREATE.TOOLS_EVENTS." + name,
		} {
			if text := auditor.deniedRequest(t, subj, durable); !strings.Contains(text, "Permissions Violation") {
				t.Fatalf("auditor %s: %q", subj, text)
			}
		}
		// Ephemerals too: their inactive threshold is the creator's
		// choice, so they pile up like durables.
		ephemeral, _ := json.Marshal(map[string]any{"stream_name": "TOOLS_EVENTS", "config": map[string]any{
			"deliver_policy": "all", "ack_policy": "none", "inactive_threshold": int64(365 * 24 * time.Hour), "mem_storage": true}})
		if text := auditor.deniedRequest(t, "$JS.API.CONSUMER.CREATE.TOOLS_EVENTS", ephemeral); !strings.Contains(text, "Permissions Violation") {
			t.Fatalf("auditor's ephemeral create: %q", text)
		}
	}
	t.Logf("%d durable and %d ephemeral create attempts by the auditor refused in %s", 3*attempts, attempts, time.Since(start))
	if after := consumers(); after != before {
		t.Fatalf("the stream has %d consumers after the auditor's attempts, %d before", after, before)
	}

	// The auditor reads every event of the log, without a consumer.
	var seqs []uint64
	for seq := uint64(1); ; {
		n := 0
		for _, m := range auditorDirectBatch(t, auditor.nc, seq) {
			var s uint64
			fmt.Sscan(m.Header.Get("Nats-Sequence"), &s)
			seqs = append(seqs, s)
			seq = s + 1
			n++
		}
		if n < 256 {
			break
		}
	}
	last := by.acked[len(by.acked)-1]
	if len(seqs) != int(last) || seqs[len(seqs)-1] != last {
		t.Fatalf("the auditor read sequences %v by direct get, want 1..%d", seqs, last)
	}

	// `engine tail` still follows the log, and the engine's own feed
	// still folds: a session written now gets a view (written by the
	// feed only) and is listed.
	tail := startFollower(t, "tail", "--last", "0", "--nats", p.NATSURL, "--nats-user", "engine", "--nats-password", pw["engine"].password)
	tail.ready(t)
	by.check(t)
	tail.expect(t, `"session":"after1"`)
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if body := rtGet(t, p.HTTPURL+"/v1/sessions"); !strings.Contains(string(body), `"after1"`) {
			return fmt.Errorf("sessions %s: no view of after1 yet", body)
		}
		return nil
	})
}

// auditorDirectBatch is one batched direct get of every session's events
// from seq on (next_by_subj tools.events.>), as the auditor reads the log.
func auditorDirectBatch(t *testing.T, nc *nats.Conn, seq uint64) []*nats.Msg {
	t.Helper()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": "tools.events.>", "batch": 256})
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.TOOLS_EVENTS", inbox, req); err != nil {
		t.Fatal(err)
	}
	var out []*nats.Msg
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("direct get from seq %d: %v", seq, err)
		}
		if st := m.Header.Get("Status"); st != "" {
			if st == "204" || st == "404" {
				return out
			}
			t.Fatalf("direct get from seq %d: status %s %s", seq, st, m.Header.Get("Description"))
		}
		out = append(out, m)
	}
}
