package server

import (
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/embedding"
)

// A zero Config is usable — its defaults are those
// documented — and Validate names every bad field at once.
func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Data != DefaultData || c.Prefix != DefaultPrefix || c.Replicas != 1 || c.Listen != DefaultListen || c.Sync != "interval" {
		t.Errorf("store defaults: %+v", c.Store)
	}
	if c.Registry == nil || c.API.SubjectPrefix != "tools.api" || c.HTTPMaxConns != DefaultHTTPMaxConns ||
		c.HTTPReadTimeout != DefaultHTTPReadTimeout || c.MinFree != DefaultMinFree ||
		c.MaxProjectionLag != DefaultMaxProjectionLag || c.ShutdownTimeout != DefaultShutdownTimeout || c.HTTP != "" || c.NoProjection {
		t.Errorf("serve defaults: %+v", c)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	err := Config{Store: Store{Sync: "never", Replicas: -1}}.Validate()
	if err == nil {
		t.Fatal("bad Config: no error")
	}
	for _, want := range []string{"--sync", "--replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

// The embeddings flags go together and are checked with the others: a
// URL without a model, a model without a URL, a URL that is not http(s)
// and a batch out of range are each named with their flag.
func TestConfigEmbeddingsValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  embedding.Config
		want string
	}{
		{embedding.Config{URL: "http://localhost:11434"}, "--embeddings-url and --embeddings-model go together"},
		{embedding.Config{Model: "nomic-embed-text"}, "--embeddings-url and --embeddings-model go together"},
		{embedding.Config{URL: "localhost:11434", Model: "m"}, "--embeddings-url"},
		{embedding.Config{URL: "http://localhost:11434", Model: "m", BatchSize: 5000}, "--embeddings-batch 5000"},
		{embedding.Config{URL: "http://localhost:11434", Model: "m", QueryTimeout: -1}, "--embeddings-query-timeout"},
		{embedding.Config{URL: "http://localhost:11434", Model: "m", Backoff: -time.Second}, "embedding back-off -1s"},
	} {
		err := Config{Embeddings: c.cfg}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want it to name %s", c.cfg, err, c.want)
		}
	}
	if err := (Config{Embeddings: embedding.Config{URL: "http://localhost:11434", Model: "nomic-embed-text"}}).Validate(); err != nil {
		t.Errorf("a good embeddings config: %v", err)
	}
}
