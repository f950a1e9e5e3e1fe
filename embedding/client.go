// Package embedding computes tool_search's vectors engine-side with the
// operator's embedding model: a client of the OpenAI-compatible
// POST /v1/embeddings API (served by OpenAI, Ollama, llama.cpp's server,
// vLLM, Hugging Face TEI and LM Studio), and a Provider that embeds each
// deferred tool's search text once per (model, tool contract hash), in
// batches in the background, keeps the vectors in a Cache that restarts
// and other engines share (a JetStream KV bucket), and embeds a query
// under a deadline.
//
// The package declares the cache it needs (Cache) and never speaks NATS.
package embedding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/toolintent/engine/internal/clip"
)

// Errors callers test for, matched with errors.Is. Others wrap them.
var (
	// ErrEndpoint: the embedding endpoint answered with an error status,
	// an answer that is not an embeddings list, or vectors that do not fit
	// the request (a count, an index, a dimension or a number wrong).
	ErrEndpoint = errors.New("embedding endpoint failed")
	// ErrTimeout: the endpoint did not answer within the deadline.
	ErrTimeout = errors.New("embedding endpoint timed out")
	// ErrDimension: the endpoint's vectors have another dimension than the
	// vectors the engine holds for the same model.
	ErrDimension = errors.New("embedding dimension changed")
	// ErrUnavailable: the endpoint failed a moment ago and is not asked
	// again until its back-off ends.
	ErrUnavailable = errors.New("embedding endpoint unavailable")
)

// MaxDim is the most numbers a vector may have (the registry's bound on
// tool embeddings).
const MaxDim = 4096

// Client calls an OpenAI-compatible embeddings endpoint. It is safe for
// concurrent use.
type Client struct {
	endpoint string
	model    string
	apiKey   string
	hc       *http.Client
}

// NewClient returns a client of the embeddings endpoint at base (see
// Endpoint) for model, sending apiKey as a bearer token when it is not
// empty. hc nil: a client of its own that keeps a few connections open
// to the endpoint, so that a query costs no new connection.
func NewClient(base, model, apiKey string, hc *http.Client) (*Client, error) {
	endpoint, err := Endpoint(base)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("embedding model is empty: give the model's name as the endpoint knows it, e.g. nomic-embed-text (Ollama) or text-embedding-3-small (OpenAI)")
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 8
		hc = &http.Client{Transport: tr}
	}
	return &Client{endpoint: endpoint, model: model, apiKey: apiKey, hc: hc}, nil
}

// Endpoint returns the URL embeddings are posted to for a base URL: base
// itself when its path ends in /embeddings, base + /embeddings when it
// ends in /v1, else base + /v1/embeddings (http://localhost:11434 →
// http://localhost:11434/v1/embeddings). A query string is kept.
func Endpoint(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", fmt.Errorf("embeddings URL %q: %w", clip.String(base, clip.Max), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("embeddings URL %q: want http:// or https:// and a host, e.g. http://localhost:11434 (Ollama) or https://api.openai.com", clip.String(base, clip.Max))
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/embeddings"):
	case strings.HasSuffix(p, "/v1"):
		p += "/embeddings"
	default:
		p += "/v1/embeddings"
	}
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

// URL returns the endpoint the client posts to.
func (c *Client) URL() string { return c.endpoint }

// Model returns the model the client asks for.
func (c *Client) Model() string { return c.model }

// Result is the answer to one embeddings request.
type Result struct {
	// Vectors are the inputs' vectors, in input order, all of one
	// dimension.
	Vectors [][]float32
	// Tokens is the input tokens the endpoint counted (usage.prompt_tokens),
	// 0 when it says none.
	Tokens int
}

type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embedResponse struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// maxAnswerBytes bounds the answer read for n inputs: room for n vectors
// of MaxDim numbers written out in full.
func maxAnswerBytes(n int) int64 { return 1<<20 + int64(n)*MaxDim*24 }

// Embed posts inputs (non-empty strings) in one request and returns their
// vectors in input order. An error status, an answer that is not an
// embeddings list, a vector missing or repeated, empty, longer than
// MaxDim, of another dimension than the others, or holding a number that
// is not finite is ErrEndpoint; no answer before ctx's deadline is
// ErrTimeout.
func (c *Client) Embed(ctx context.Context, inputs []string) (Result, error) {
	if len(inputs) == 0 {
		return Result{}, nil
	}
	body, err := json.Marshal(embedRequest{Model: c.model, Input: inputs})
	if err != nil {
		return Result{}, fmt.Errorf("encode embeddings request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Result{}, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes(len(inputs))+1))
	if err != nil {
		return Result{}, c.transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("%w: %s answered %s: %s", ErrEndpoint, c.endpoint, resp.Status, errorText(data))
	}
	if int64(len(data)) > maxAnswerBytes(len(inputs)) {
		return Result{}, fmt.Errorf("%w: %s answered more than %d bytes for %d inputs", ErrEndpoint, c.endpoint, maxAnswerBytes(len(inputs)), len(inputs))
	}
	var er embedResponse
	if err := json.Unmarshal(data, &er); err != nil {
		return Result{}, fmt.Errorf("%w: %s answered no embeddings list (%v): %s", ErrEndpoint, c.endpoint, err, clip.String(string(data), clip.Max))
	}
	return c.result(er, len(inputs))
}

// result checks an answer for n inputs and orders its vectors.
func (c *Client) result(er embedResponse, n int) (Result, error) {
	if len(er.Data) != n {
		return Result{}, fmt.Errorf("%w: %s answered %d vectors for %d inputs of model %q", ErrEndpoint, c.endpoint, len(er.Data), n, c.model)
	}
	out := make([][]float32, n)
	dim := 0
	for j, d := range er.Data {
		i := j
		if d.Index != nil {
			i = *d.Index
		}
		if i < 0 || i >= n || out[i] != nil {
			return Result{}, fmt.Errorf("%w: %s answered index %d twice or out of 0..%d", ErrEndpoint, c.endpoint, i, n-1)
		}
		v := d.Embedding
		if len(v) == 0 || len(v) > MaxDim {
			return Result{}, fmt.Errorf("%w: %s answered a vector of %d numbers for input %d; want 1 to %d", ErrEndpoint, c.endpoint, len(v), i, MaxDim)
		}
		if dim == 0 {
			dim = len(v)
		} else if len(v) != dim {
			return Result{}, fmt.Errorf("%w: %s answered vectors of %d and %d numbers in one request; want one dimension", ErrEndpoint, c.endpoint, dim, len(v))
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return Result{}, fmt.Errorf("%w: %s answered a number that is not finite for input %d", ErrEndpoint, c.endpoint, i)
			}
		}
		out[i] = v
	}
	return Result{Vectors: out, Tokens: er.Usage.PromptTokens}, nil
}

// transportError names a failed exchange: ErrTimeout past ctx's deadline
// (or a network timeout), else ErrEndpoint.
func (c *Client) transportError(ctx context.Context, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %s gave no answer in time", ErrTimeout, c.endpoint)
	}
	return fmt.Errorf("%w: %s: %w", ErrEndpoint, c.endpoint, err)
}

// errorText is the message of an error answer: its "error.message" (the
// OpenAI error shape), or "error" when a string (Ollama, TEI), or the
// start of the body.
func errorText(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		var msg struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &msg) == nil && msg.Message != "":
			return clip.String(msg.Message, 200)
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return clip.String(s, 200)
		}
	}
	if t := strings.TrimSpace(string(data)); t != "" {
		return clip.String(t, 200)
	}
	return "(no body)"
}
