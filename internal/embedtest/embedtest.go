// Package embedtest is a stand-in for an OpenAI-compatible embeddings
// endpoint (POST /v1/embeddings), for tests of several packages and of
// the engine binary: it answers with deterministic vectors computed from
// the input's words and the model's name (no model is downloaded), counts
// what it was asked, and can be told to fail: an error status, a delay, a
// vector of the wrong dimension.
package embedtest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolintent/engine/toolsearch/searcheval"
)

// DefaultDim is the dimension of a Server's vectors unless told another.
const DefaultDim = 64

// Server is a running stand-in endpoint. Its methods are safe for
// concurrent use with the requests it serves.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	dim      int
	status   int           // answer every request with this status (0: 200)
	statusQ  bool          // status applies only to one-input requests
	delay    time.Duration // before answering a request
	delayQ   bool          // delay applies only to one-input requests
	badDim   bool          // the last vector of each answer has one number more
	requests int
	inputs   int
	texts    map[string]int // how often each input was embedded
	models   map[string]int // requests per model
	sizes    []int          // inputs per request, in order
	synonyms map[string]string
}

// Start runs a stand-in on a loopback port until the test ends.
func Start(t interface {
	Helper()
	Cleanup(func())
}) *Server {
	t.Helper()
	s := &Server{dim: DefaultDim, texts: map[string]int{}, models: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to give the engine (--embeddings-url).
func (s *Server) URL() string { return s.srv.URL }

// SetDim sets the dimension of the vectors answered from now on.
func (s *Server) SetDim(d int) { s.mu.Lock(); s.dim = d; s.mu.Unlock() }

// Fail answers every request (only queries, one input each, when
// queryOnly) with status, or, for status 0, answers normally again.
func (s *Server) Fail(status int, queryOnly bool) {
	s.mu.Lock()
	s.status, s.statusQ = status, queryOnly
	s.mu.Unlock()
}

// Delay holds every request (only queries when queryOnly) for d before
// answering; 0 answers at once again.
func (s *Server) Delay(d time.Duration, queryOnly bool) {
	s.mu.Lock()
	s.delay, s.delayQ = d, queryOnly
	s.mu.Unlock()
}

// BadDimension makes the last vector of every answer one number longer
// than the others (on) or not (off).
func (s *Server) BadDimension(on bool) { s.mu.Lock(); s.badDim = on; s.mu.Unlock() }

// Synonyms has each key word embed as its value word from now on: a
// query of words no tool has ("blorft") lands near the tools of the word
// it stands for, as a real model's paraphrase does.
func (s *Server) Synonyms(m map[string]string) {
	s.mu.Lock()
	s.synonyms = m
	s.mu.Unlock()
}

// Requests returns the requests answered (or failed) so far.
func (s *Server) Requests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.requests }

// Inputs returns the inputs of all requests so far.
func (s *Server) Inputs() int { s.mu.Lock(); defer s.mu.Unlock(); return s.inputs }

// Sizes returns the inputs of each request so far, in order.
func (s *Server) Sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

// Embedded returns how many inputs containing sub were embedded so far.
func (s *Server) Embedded(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for t, c := range s.texts {
		if strings.Contains(t, sub) {
			n += c
		}
	}
	return n
}

// Models returns the requests per model so far.
func (s *Server) Models() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.models))
	for m, n := range s.models {
		out[m] = n
	}
	return out
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if json.Unmarshal(req.Input, &one) != nil {
			http.Error(w, `{"error":{"message":"input: want a string or an array of strings"}}`, http.StatusBadRequest)
			return
		}
		inputs = []string{one}
	}
	s.mu.Lock()
	s.requests++
	s.inputs += len(inputs)
	s.sizes = append(s.sizes, len(inputs))
	s.models[req.Model]++
	for _, in := range inputs {
		s.texts[in]++
	}
	one := len(inputs) == 1
	status, delay, dim, badDim, syn := s.status, s.delay, s.dim, s.badDim, s.synonyms
	if s.statusQ && !one {
		status = 0
	}
	if s.delayQ && !one {
		delay = 0
	}
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 && status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"stand-in told to fail with %d","type":"server_error"}}`, status)
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: req.Model}
	for i, in := range inputs {
		d := dim
		if badDim && i == len(inputs)-1 {
			d++
		}
		text := in
		if len(syn) > 0 {
			ws := words(in)
			for j, w := range ws {
				if r, ok := syn[w]; ok {
					ws[j] = r
				}
			}
			text = strings.Join(ws, " ")
		}
		out.Data = append(out.Data, datum{Object: "embedding", Index: i, Embedding: Vector(req.Model, text, d)})
		out.Usage.PromptTokens += len(words(in))
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Vector is the stand-in's vector of text for model: the sum of one
// fixed pseudo-random unit vector per word (lower-cased, a word's
// vector seeded by the model and the word), at unit length. Texts that
// share words are near; the same model and text give the same vector.
func Vector(model, text string, dim int) []float32 {
	v := make([]float64, dim)
	for _, w := range words(text) {
		h := fnv.New64a()
		h.Write([]byte(model))
		h.Write([]byte{0})
		h.Write([]byte(w))
		rng := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
		for i := range v {
			v[i] += rng.NormFloat64()
		}
	}
	var sq float64
	for _, x := range v {
		sq += x * x
	}
	out := make([]float32, dim)
	if sq == 0 {
		out[0] = 1
		return out
	}
	n := math.Sqrt(sq)
	for i, x := range v {
		out[i] = float32(x / n)
	}
	return out
}

// words splits text into lower-case words of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// MCPRegistry returns a registry file (JSON) of the default registry
// plus at least n MCP tools, every server deferred, under version: the
// labelled corpus of searcheval repeated (searcheval.MCPRegistry).
func MCPRegistry(n int, version string) ([]byte, error) { return searcheval.MCPRegistry(n, version) }
