package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkHTTPTurn runs turn/begin and turn/end over the HTTP API on one
// session against a real embedded server, for profiles of the transport's
// share of a turn; engine bench's turn-cycle lines measure it.
//
//	go test -run '^$' -bench HTTPTurn -benchtime 2000x -cpuprofile /tmp/ht.pprof ./api/
func BenchmarkHTTPTurn(b *testing.B) {
	env := newEnv(b, Config{})
	post := func(path string) {
		resp, err := http.Post(env.httpURL+"/v1/sessions/ht/"+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	b.ReportAllocs()
	for range b.N {
		post("turn/begin")
		post("turn/end")
	}
}
