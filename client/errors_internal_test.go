package client

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sentinels reads the Err* = &Error{Code: "..."} sentinels of errors.go,
// by code.
func sentinels(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Err") {
			return true
		}
		u, ok := vs.Values[0].(*ast.UnaryExpr)
		if !ok {
			return true
		}
		cl, ok := u.X.(*ast.CompositeLit)
		if !ok {
			return true
		}
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if k, _ := kv.Key.(*ast.Ident); ok && k != nil && k.Name == "Code" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok {
					code, _ := strconv.Unquote(lit.Value)
					out[code] = vs.Names[0].Name
				}
			}
		}
		return true
	})
	return out
}

// Every error code of docs/api.md has a sentinel that
// errors.Is matches against a real reply of that code, and a reply whose
// body is not the envelope (a proxy) gets a documented code of its own
// status: 409 and 507 used to become invalid and internal.
func TestSentinelForEveryDocumentedCode(t *testing.T) {
	data, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllStringSubmatch(string(data), -1)
	if len(rows) < 10 {
		t.Fatalf("docs/api.md lists %d error codes; the table was not found", len(rows))
	}
	byStatus := map[int][]string{}
	have := sentinels(t)
	for _, r := range rows {
		code := r[1]
		status, _ := strconv.Atoi(r[2])
		byStatus[status] = append(byStatus[status], code)
		name, ok := have[code]
		if !ok {
			t.Errorf("documented code %s (%d) has no sentinel in client/errors.go", code, status)
			continue
		}
		reply := replyError(status, []byte(`{"error":{"code":"`+code+`","message":"m"}}`))
		if !errors.Is(reply, &Error{Code: code}) {
			t.Errorf("a %d %s reply is not errors.Is %s", status, code, name)
		}
	}
	for status, codes := range byStatus {
		e := replyError(status, []byte("<html>bad gateway page</html>"))
		var ce *Error
		if !errors.As(e, &ce) || ce.Status != status {
			t.Fatalf("%d without an envelope: %v", status, e)
		}
		found := false
		for _, c := range codes {
			found = found || c == ce.Code
		}
		if !found {
			t.Errorf("a %d reply without an envelope has code %s, want one of %v", status, ce.Code, codes)
		}
	}
}
