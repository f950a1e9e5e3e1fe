package api

import (
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"

	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/api.md is generated from the operation table, the request and
// reply types (their JSON Schemas) and the error codes of errors.go, with
// example replies from real calls: `go test ./api -run TestAPIDoc -update`
// rewrites it. Without -update the test regenerates it from the table and
// the page's own examples and fails on any difference, then calls every
// operation the page lists, over NATS and over HTTP, with the documented
// request, and checks every documented reply field.

var updateDoc = flag.Bool("update", false, "rewrite docs/api.md from the operation table and live example replies")

const apiDocPath = "../docs/api.md"

// docOrder is the order of the page: a working scenario, since each
// request builds on the previous ones (the turn operations need an open
// turn, resume a checkpoint).
var docOrder = []string{"append", "intent", "resolve", "history", "explain", "explain-batch",
	"turn-begin", "turn-discover", "turn-dispatch", "turn-inspect", "turn-call-check", "turn-checkpoint", "turn-end",
	"resume", "sessions", "registry", "budget", "registry-diff", "session-compact", "session-delete"}

// docRequests are the documented requests, in their NATS form (the JSON
// body; over HTTP the path fields go into the path).
var docRequests = map[string]string{
	"append":          `{"session":"doc1","commands":[{"type":"ToolsToggled","enabled":true},{"type":"ToolDisabled","name":"bash"}]}`,
	"intent":          `{"session":"doc1","min_seq":2}`,
	"resolve":         `{"session":"doc1","provider":"anthropic","min_seq":2}`,
	"history":         `{"session":"doc1","until":2}`,
	"explain":         `{"session":"doc1","tool":"bash"}`,
	"explain-batch":   `{"session":"doc1","tools":["bash","read_file"]}`,
	"turn-begin":      `{"session":"doc1","provider":"anthropic"}`,
	"turn-discover":   `{"session":"doc1","input":{"names":["send_message"]}}`,
	"turn-dispatch":   `{"session":"doc1"}`,
	"turn-inspect":    `{"session":"doc1"}`,
	"turn-call-check": `{"session":"doc1","tool":"send_message"}`,
	"turn-checkpoint": `{"session":"doc1"}`,
	"turn-end":        `{"session":"doc1"}`,
	"resume":          `{"session":"doc1"}`,
	"sessions":        `{}`,
	"session-compact": `{"session":"doc1","reason":"archive"}`,
	"session-delete":  `{"session":"doc1","reason":"user request"}`,
	"registry":        `{}`,
	"budget":          `{}`,
	"registry-diff":   `{"registry":{"version":"doc-2","tools":[{"name":"read_file","description":"Reads a file.","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},{"name":"tool_search","description":"Loads deferred tools.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}],"default_tools":["read_file","tool_search"]}}`,
}

func TestAPIDocOrderCoversEveryOperation(t *testing.T) {
	var names []string
	for _, op := range Operations() {
		names = append(names, op.Name)
	}
	got := slices.Clone(docOrder)
	slices.Sort(got)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Fatalf("docs/api.md order %v does not list exactly the operations %v", got, names)
	}
	for _, n := range names {
		if _, ok := docRequests[n]; !ok {
			t.Errorf("operation %s has no documented request", n)
		}
	}
}

// TestAPIDoc regenerates docs/api.md (or checks it), then calls every
// operation the page lists over both transports.
func TestAPIDoc(t *testing.T) {
	var requests, replies map[string]string
	if *updateDoc {
		requests = docRequests
		replies = map[string]string{}
	} else {
		data, err := os.ReadFile(apiDocPath)
		if err != nil {
			t.Fatalf("read %s: %v (generate it: go test ./api -run TestAPIDoc -update)", apiDocPath, err)
		}
		var order []string
		order, requests, replies = parseAPIDoc(t, string(data))
		if !slices.Equal(order, docOrder) {
			t.Fatalf("docs/api.md lists %v, the operation table %v: go test ./api -run TestAPIDoc -update", order, docOrder)
		}
		if want := renderAPIDoc(t, requests, replies); want != string(data) {
			t.Fatalf("docs/api.md differs from what the operation table, the types and errors.go give: run go test ./api -run TestAPIDoc -update (first difference at %s)", firstDiff(string(data), want))
		}
	}
	for _, transport := range []string{"nats", "http"} {
		t.Run(transport, func(t *testing.T) {
			// The page's channel is the erase channel, with an eraser,
			// so that session-compact is documented by a real call.
			env := newEnv(t, Config{EraseChannel: "doc"})
			x, err := env.eng.Log().NewEraser(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			env.eng.SetEraser(x)
			v := openAPIValidator(t, env)
			for _, name := range docOrder {
				body, status := callDocumented(t, env, transport, name, requests[name])
				if status != http.StatusOK {
					t.Fatalf("%s over %s: status %d: %s", name, transport, status, body)
				}
				// The request and the real reply are what
				// /v1/openapi.json says (over NATS: as the HTTP operation).
				req, reqBody := docHTTPRequest(t, env, name, requests[name])
				checkOpenAPI(t, v, transport+" "+name, req, reqBody, status, body)
				var reply map[string]any
				if err := json.Unmarshal(body, &reply); err != nil {
					t.Fatalf("%s over %s: reply is not a JSON object: %v: %s", name, transport, err, body)
				}
				checkDecodeReply(t, transport+" "+name, opsByName[name].RespType, body)
				for _, f := range docFields(ResponseSchema(name), "", true) {
					if f.always {
						if _, ok := lookupPath(reply, f.path); !ok {
							t.Errorf("%s over %s: documented reply field %s is missing: %s", name, transport, f.path, clip.Raw(body))
						}
					}
				}
				if *updateDoc && transport == "nats" {
					replies[name] = exampleReply(reply)
				}
			}
		})
	}
	if *updateDoc && !t.Failed() {
		if err := os.WriteFile(apiDocPath, []byte(renderAPIDoc(t, requests, replies)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMicroInfoHasSchemas checks that `nats micro info` shows each
// endpoint's request and reply schema.
func TestMicroInfoHasSchemas(t *testing.T) {
	env := newEnv(t, Config{})
	msg, err := env.nc.Request("$SRV.INFO."+ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Endpoints []struct {
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	// The operations, the live ones and the endpoint answering unknown
	// ones.
	if len(info.Endpoints) != len(operations)+len(liveOps)+1 {
		t.Fatalf("micro info lists %d endpoints, want %d", len(info.Endpoints), len(operations)+len(liveOps)+1)
	}
	for _, e := range info.Endpoints {
		if e.Name == unknownOpEndpoint || liveOps[e.Name] != nil {
			continue
		}
		for key, want := range map[string]Schema{"request_schema": RequestSchema(e.Name), "response_schema": ResponseSchema(e.Name)} {
			var got Schema
			if err := json.Unmarshal([]byte(e.Metadata[key]), &got); err != nil {
				t.Fatalf("%s %s: %v", e.Name, key, err)
			}
			wantJSON, _ := json.Marshal(want)
			gotJSON, _ := json.Marshal(got)
			if !bytes.Equal(wantJSON, gotJSON) || got["type"] != "object" {
				t.Errorf("%s %s = %s, want %s", e.Name, key, gotJSON, wantJSON)
			}
		}
	}
}

// docHTTPRequest is a documented request (NATS form) as its HTTP request,
// with its body: the path fields in the path, the others in the query
// (GET) or the JSON body (POST).
func docHTTPRequest(t *testing.T, env *testEnv, name, reqJSON string) (*http.Request, []byte) {
	t.Helper()
	op := opsByName[name]
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(reqJSON), &fields); err != nil {
		t.Fatalf("%s: documented request: %v", name, err)
	}
	path := op.Path
	for _, n := range openapi.PathNames(op.Path) {
		var v string
		if err := json.Unmarshal(fields[n], &v); err != nil {
			t.Fatalf("%s: path field %s: %v", name, n, err)
		}
		path = strings.ReplaceAll(path, "{"+n+"}", url.PathEscape(v))
		delete(fields, n)
	}
	method := op.Methods[0]
	var req *http.Request
	var body []byte
	var err error
	if method == http.MethodGet || method == http.MethodDelete {
		q := url.Values{}
		for k, raw := range fields {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw)
			}
			q.Set(k, s)
		}
		u := env.httpURL + path
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		req, err = http.NewRequest(method, u, nil)
	} else {
		body, _ = json.Marshal(fields)
		req, err = http.NewRequest(method, env.httpURL+path, bytes.NewReader(body))
		if req != nil {
			req.Header.Set("Content-Type", MIMEJSON)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return req, body
}

// callDocumented sends a documented request over a transport and returns
// the reply body and status (200 for a NATS reply without an error code).
func callDocumented(t *testing.T, env *testEnv, transport, name, reqJSON string) ([]byte, int) {
	t.Helper()
	if transport == "nats" {
		subj, err := Subject("", "doc", name)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := env.nc.Request(subj, []byte(reqJSON), 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subj, err)
		}
		status := http.StatusOK
		if c := msg.Header.Get("Nats-Service-Error-Code"); c != "" {
			status, _ = strconv.Atoi(c)
		}
		return msg.Data, status
	}
	req, _ := docHTTPRequest(t, env, name, reqJSON)
	method, path := req.Method, req.URL.Path
	req.Header.Set(HeaderChannel, "doc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return body, resp.StatusCode
}

func lookupPath(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		if strings.HasSuffix(part, "[]") {
			part = strings.TrimSuffix(part, "[]")
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			arr, ok := m[part].([]any)
			if !ok {
				return nil, false
			}
			if len(arr) == 0 {
				return nil, true // nothing below to check
			}
			v = arr[0]
			continue
		}
		if v == nil {
			return nil, true // under an empty array
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// exampleReply is a reply as the page shows it: indented, arrays cut to
// 3 items and strings to 72 characters.
func exampleReply(v any) string {
	var cut func(v any) any
	cut = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = cut(e)
			}
		case []any:
			if len(x) > 3 {
				x = x[:3]
			}
			for i, e := range x {
				x[i] = cut(e)
			}
			return x
		case string:
			if len(x) > 72 {
				return x[:72] + "..."
			}
		}
		return v
	}
	b, _ := json.MarshalIndent(cut(v), "", "  ")
	return string(b)
}

// docField is one row of a field table.
type docField struct {
	path, typ string
	always    bool
}

// docFields flattens a schema into dotted paths, arrays of objects as
// name[].field.
//
// With nested, a nested field is marked only when its parents are too
// (reply tables: "always present"); without, when it is required within
// its parent (request tables).
func docFields(s Schema, prefix string, nested bool) []docField {
	props, _ := s["properties"].(Schema)
	req, _ := s["required"].([]string)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []docField
	for _, n := range names {
		ps := props[n].(Schema)
		path := prefix + n
		out = append(out, docField{path: path, typ: typeName(ps), always: slices.Contains(req, n)})
		if strings.Count(path, ".") >= 2 {
			continue
		}
		switch {
		case ps["type"] == "object" && ps["properties"] != nil:
			sub := docFields(ps, path+".", nested)
			for i := range sub {
				sub[i].always = sub[i].always && (!nested || slices.Contains(req, n))
			}
			out = append(out, sub...)
		case ps["type"] == "array":
			if items, _ := ps["items"].(Schema); items["type"] == "object" && items["properties"] != nil {
				sub := docFields(items, path+"[].", nested)
				for i := range sub {
					sub[i].always = sub[i].always && (!nested || slices.Contains(req, n))
				}
				out = append(out, sub...)
			}
		}
	}
	return out
}

func typeName(s Schema) string {
	if _, ok := s["oneOf"]; ok {
		return "command object"
	}
	switch t := s["type"].(type) {
	case string:
		switch t {
		case "array":
			items, _ := s["items"].(Schema)
			return "array of " + typeName(items)
		case "object":
			if ap, ok := s["additionalProperties"].(Schema); ok {
				return "object of " + typeName(ap)
			}
			return "object"
		case "integer":
			if s["minimum"] != nil && s["maximum"] != nil {
				return fmt.Sprintf("integer %v to %v", s["minimum"], s["maximum"])
			}
			if s["minimum"] != nil {
				return "integer ≥ 0"
			}
			return "integer"
		case "string":
			if s["format"] == "date-time" {
				return "string (RFC 3339 time)"
			}
			if s["pattern"] == openapi.SessionIDPattern {
				return "session id"
			}
			if enum, ok := s["enum"].([]string); ok {
				return "string: " + strings.Join(enum, ", ")
			}
		}
		return t
	case []string:
		return strings.Join(t, " or ")
	}
	return "any JSON"
}

var (
	docOpHeading = regexp.MustCompile("(?m)^### `([a-z-]+)`")
	docBlock     = regexp.MustCompile("(?s)```json\n(.*?)\n```")
)

// parseAPIDoc reads the page's operations in order, with their request
// and example reply blocks.
func parseAPIDoc(t *testing.T, doc string) (order []string, requests, replies map[string]string) {
	t.Helper()
	requests, replies = map[string]string{}, map[string]string{}
	locs := docOpHeading.FindAllStringSubmatchIndex(doc, -1)
	for i, loc := range locs {
		name := doc[loc[2]:loc[3]]
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		section := doc[loc[0]:end]
		if j := strings.Index(section, "\n## "); j >= 0 {
			section = section[:j]
		}
		blocks := docBlock.FindAllStringSubmatch(section, -1)
		if len(blocks) != 2 {
			t.Fatalf("docs/api.md: operation %s has %d JSON blocks, want 2 (request, reply)", name, len(blocks))
		}
		order = append(order, name)
		requests[name], replies[name] = blocks[0][1], blocks[1][1]
	}
	return order, requests, replies
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: have %q, want %q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("line %d (lengths %d and %d lines)", min(len(la), len(lb))+1, len(la), len(lb))
}

// errorCodes reads the Code constants of wire/errors.go with their
// comments (the codes are wire's; docs/api.md lists each).
func errorCodes(t *testing.T) [][3]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../wire/errors.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	status := regexp.MustCompile(`^Code\w+ \((\d{3})\):\s*`)
	var out [][3]string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			code, _ := strconv.Unquote(lit.Value)
			text := strings.Join(strings.Fields(vs.Doc.Text()), " ")
			m := status.FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("wire/errors.go: the comment of %s must start with %q", vs.Names[0].Name, vs.Names[0].Name+" (STATUS):")
			}
			out = append(out, [3]string{code, m[1], noGoNames(text[len(m[0]):])})
		}
	}
	return out
}

// noGoNames rewrites the Go-only words of a comment for the page.
func noGoNames(s string) string {
	s = regexp.MustCompile(`\bCode([A-Z]\w*)`).ReplaceAllStringFunc(s, func(w string) string { return "that code" })
	return strings.ReplaceAll(s, "Config.", "")
}

func renderAPIDoc(t *testing.T, requests, replies map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(apiDocIntro)
	b.WriteString("\n## Error codes\n\nEvery error reply has the body `{\"error\":{\"code\":CODE,\"message\":TEXT}}` (a `conflict` adds\n`expected` and `actual`, the sequences). Clients switch on the code, never on the message.\n\n| code | HTTP status and `Nats-Service-Error-Code` | meaning |\n|---|---|---|\n")
	for _, c := range errorCodes(t) {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c[0], c[1], strings.ReplaceAll(c[2], "|", "\\|"))
	}
	b.WriteString("\n## Operations\n\n| operation | NATS subject (after `tools.api.<channel>.`) | HTTP | writes events |\n|---|---|---|---|\n")
	for _, name := range docOrder {
		op := opsByName[name]
		fmt.Fprintf(&b, "| [`%s`](#%s) | `%s` | `%s %s` | %s |\n", name, name, op.Subject, strings.Join(op.Methods, ", "), op.Path, yesNo(op.Write))
	}
	for _, name := range docOrder {
		op := opsByName[name]
		fmt.Fprintf(&b, "\n### `%s`\n\n%s\n\n", name, op.Summary)
		fmt.Fprintf(&b, "- NATS: request to `tools.api.<channel>.%s`\n", op.Subject)
		fmt.Fprintf(&b, "- Python: `Client.%s(...)` of [clients/python](python.md)\n", strings.ReplaceAll(name, "-", "_"))
		fmt.Fprintf(&b, "- HTTP: `%s %s`", strings.Join(op.Methods, "` or `"), op.Path)
		switch {
		case slices.Contains(op.Methods, http.MethodGet) && slices.Contains(op.Methods, http.MethodPost):
			b.WriteString(" (GET: the other fields as query parameters; POST: as a JSON body)\n")
		case slices.Contains(op.Methods, http.MethodGet), slices.Contains(op.Methods, http.MethodDelete):
			b.WriteString(" (the other fields as query parameters)\n")
		default:
			b.WriteString(" (the other fields as a JSON body)\n")
		}
		if op.Write {
			b.WriteString("- Writes events: the channel and the actor are recorded on them.\n")
		}
		b.WriteString("\nRequest:\n\n```json\n" + requests[name] + "\n```\n\n")
		writeFieldTable(&b, "request field", "required (within its parent)", docFields(RequestSchema(name), "", false))
		b.WriteString("\nReply (a real reply; arrays cut to 3 items, strings to 72 characters):\n\n```json\n" + replies[name] + "\n```\n\n")
		writeFieldTable(&b, "reply field", "always present", docFields(ResponseSchema(name), "", true))
	}
	renderLiveDoc(&b)
	return b.String()
}

// renderLiveDoc writes the live subscriptions' section.
func renderLiveDoc(b *strings.Builder) {
	b.WriteString(liveDocIntro)
	b.WriteString("\n| operation | NATS subject (after `tools.api.<channel>.`) | HTTP | summary |\n|---|---|---|---|\n")
	for _, o := range wire.LiveOperations() {
		fmt.Fprintf(b, "| `%s` | `%s` | `GET %s` | %s |\n", o.Name, o.Subject, o.Path, strings.ReplaceAll(o.Summary, "|", "\\|"))
	}
	b.WriteString("\nThe event (the `data:` line over HTTP, the body of an `event` message over NATS):\n\n")
	writeFieldTable(b, "event field", "always present", docFields(schemaOf(reflect.TypeFor[service.LiveEvent]()), "", true))
}

func writeFieldTable(b *strings.Builder, what, always string, fields []docField) {
	if len(fields) == 0 {
		fmt.Fprintf(b, "No %ss.\n", what)
		return
	}
	fmt.Fprintf(b, "| %s | type | %s |\n|---|---|---|\n", what, always)
	for _, f := range fields {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", f.path, f.typ, yesNo(f.always))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkDecodeReply: the Go client decodes a reply with client.DecodeReply
// (go-json); it must give the reply type's value encoding/json gives.
func checkDecodeReply(t *testing.T, what string, rt reflect.Type, body []byte) {
	t.Helper()
	want, got := reflect.New(rt), reflect.New(rt)
	if err := json.Unmarshal(body, want.Interface()); err != nil {
		t.Fatalf("%s: encoding/json cannot decode the reply into %v: %v", what, rt, err)
	}
	if err := client.DecodeReply(body, got.Interface()); err != nil {
		t.Fatalf("%s: client.DecodeReply cannot decode the reply into %v: %v", what, rt, err)
	}
	if !reflect.DeepEqual(want.Interface(), got.Interface()) {
		t.Fatalf("%s: client.DecodeReply and encoding/json decode the reply into %v differently:\n%#v\n%#v", what, rt, want.Elem().Interface(), got.Elem().Interface())
	}
}
