package api

import (
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/wire"

	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// openAPIValidator fetches the document the gateway serves at
// /v1/openapi.json and builds a validator of it (pb33f's, which speaks
// OpenAPI 3.1 and JSON Schema 2020-12): the document must itself be valid.
func openAPIValidator(t *testing.T, env *testEnv) validator.Validator {
	t.Helper()
	st, h, body := rawHTTP(t, http.MethodGet, env.httpURL+PathOpenAPI, "")
	if st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), MIMEJSON) {
		t.Fatalf("GET %s: %d %s: %s", PathOpenAPI, st, h.Get("Content-Type"), clip.Raw(body))
	}
	doc, err := libopenapi.NewDocument(body)
	if err != nil {
		t.Fatalf("%s is not an OpenAPI document: %v", PathOpenAPI, err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("%s: OpenAPI %s, want 3.1.0", PathOpenAPI, v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("%s: validator: %v", PathOpenAPI, errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s is not valid OpenAPI 3.1: %s (%s)", PathOpenAPI, e.Message, e.Reason)
		}
		t.FailNow()
	}
	return v
}

// checkOpenAPI validates a request (when the call should succeed) and its
// reply (status and JSON body, from either transport) against the
// document.
func checkOpenAPI(t *testing.T, v validator.Validator, what string, req *http.Request, reqBody []byte, status int, body []byte) {
	t.Helper()
	mk := func() *http.Request {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		r.ContentLength = int64(len(reqBody))
		return r
	}
	if status == http.StatusOK {
		if ok, errs := v.ValidateHttpRequest(mk()); !ok {
			for _, e := range errs {
				t.Errorf("%s: request %s %s does not match the OpenAPI document: %s: %s %v", what, req.Method, req.URL, e.Message, e.Reason, schemaErrs(e.SchemaValidationErrors))
			}
		}
	}
	resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {MIMEJSON}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: mk()}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		resp.Header.Set(wire.HeaderRetryAfter, "1")
	}
	if ok, errs := v.ValidateHttpResponse(mk(), resp); !ok {
		for _, e := range errs {
			t.Errorf("%s: reply %d does not match the OpenAPI document: %s: %s %v: %s", what, status, e.Message, e.Reason, schemaErrs(e.SchemaValidationErrors), clip.Raw(body))
		}
	}
}

func schemaErrs[E any](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte(' ')
	}
	return b.String()
}

// Error replies of every operation, over HTTP and NATS, are
// the document's error envelope: a bad session id (400 invalid) for each
// operation that has one, a conflict (409, with expected and actual), an
// idempotency key reused with other commands (422), a 405, a 404.
func TestOpenAPIErrorReplies(t *testing.T) {
	env := newEnv(t, Config{})
	v := openAPIValidator(t, env)
	seen := map[int]bool{}
	call := func(what, name, reqJSON string, headers ...string) {
		t.Helper()
		req, reqBody := docHTTPRequest(t, env, name, reqJSON)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		// HTTP.
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("%s over http: 200 %s, want an error", what, clip.Raw(body))
		}
		seen[resp.StatusCode] = true
		checkOpenAPI(t, v, "http "+what, req, reqBody, resp.StatusCode, body)
		// NATS.
		subj, err := Subject("", "doc", name)
		if err != nil {
			t.Fatal(err)
		}
		msg := rawNATS(t, env.nc, subj, reqJSON, headers...)
		st, _ := strconv.Atoi(msg.Header.Get("Nats-Service-Error-Code"))
		if st == 0 {
			t.Fatalf("%s over nats: no error: %s", what, clip.Raw(msg.Data))
		}
		checkOpenAPI(t, v, "nats "+what, req, reqBody, st, msg.Data)
	}
	for _, op := range operations {
		if strings.Contains(op.Path, "{session}") {
			var m map[string]any
			_ = json.Unmarshal([]byte(docRequests[op.Name]), &m)
			m["session"] = "not a session!"
			b, _ := json.Marshal(m)
			call(op.Name+" with a bad session id", op.Name, string(b))
		}
	}
	call("append expecting another sequence", "append", `{"session":"oa","expected_seq":5,"commands":[{"type":"ToolDisabled","name":"bash"}]}`)
	ok, _, b := rawHTTP(t, http.MethodPost, env.httpURL+"/v1/sessions/oa/events", `{"commands":[{"type":"ToolDisabled","name":"bash"}]}`, wire.HeaderIdempotencyKey, "k-oa")
	if ok != http.StatusOK {
		t.Fatalf("keyed append: %d %s", ok, b)
	}
	call("append reusing a key with other commands", "append", `{"session":"oa","commands":[{"type":"ToolEnabled","name":"bash"}]}`, wire.HeaderIdempotencyKey, "k-oa")
	for _, want := range []int{http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity} {
		if !seen[want] {
			t.Errorf("no %d reply was checked", want)
		}
	}
	// 405 and 404 (HTTP only: routes the document has no operation for)
	// carry the envelope too.
	for _, c := range []struct{ method, path string }{{http.MethodPut, "/v1/sessions/oa"}, {http.MethodGet, "/v1/nope"}} {
		st, _, body := rawHTTP(t, c.method, env.httpURL+c.path, "")
		var env struct {
			Error APIError `json:"error"`
		}
		if err := json.Unmarshal(body, &env); err != nil || st < 400 || env.Error.Code == "" || env.Error.Message == "" {
			t.Errorf("%s %s: %d %s, want the error envelope", c.method, c.path, st, body)
		}
	}
	// The validator is not lenient: a reply missing a documented field, or
	// an error with an undocumented code, is refused.
	req, reqBody := docHTTPRequest(t, env, "intent", docRequests["intent"])
	for _, bad := range []struct {
		status int
		body   string
	}{{http.StatusOK, `{"session":"oa"}`}, {http.StatusBadRequest, `{"error":{"code":"no_such_code","message":"x"}}`}} {
		resp := &http.Response{StatusCode: bad.status, Header: http.Header{"Content-Type": {MIMEJSON}}, Body: io.NopCloser(strings.NewReader(bad.body)), Request: req}
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		if ok, _ := v.ValidateHttpResponse(r, resp); ok {
			t.Errorf("the validator accepts %d %s for intent", bad.status, bad.body)
		}
	}
	app, _ := docHTTPRequest(t, env, "append", `{"session":"oa","commandz":[]}`)
	app.Body = io.NopCloser(strings.NewReader(`{"commandz":[]}`))
	if ok, _ := v.ValidateHttpRequest(app); ok {
		t.Errorf("the validator accepts an append body with an unknown field")
	}
}

// The document is served without a token when the engine has
// no tokens file, and with one to any of its tokens, read-only included
// (the read operations' rule); without a token it is 401.
func TestOpenAPIServedAsReadOperations(t *testing.T) {
	tokens, err := tokens.Parse([]byte(`[{"token":"audit-token-0123456789","channel":"audit","read_only":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{Tokens: tokens})
	if st, _, b := rawHTTP(t, http.MethodGet, env.httpURL+PathOpenAPI, ""); st != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s, want 401", st, b)
	}
	if st, _, b := rawHTTP(t, http.MethodGet, env.httpURL+PathOpenAPI, "", "Authorization", "Bearer audit-token-0123456789"); st != http.StatusOK || !json.Valid(b) {
		t.Fatalf("read-only token: %d %s, want 200 and the document", st, clip.Raw(b))
	}
}
