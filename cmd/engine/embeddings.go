package main

import (
	"time"

	"github.com/toolintent/engine/embedding"
)

// embeddingFlags turn on tool_search's engine-side embeddings: the
// operator's OpenAI-compatible embedding endpoint and model.
type embeddingFlags struct {
	EmbeddingsURL            string        `name:"embeddings-url" env:"ENGINE_EMBEDDINGS_URL" placeholder:"URL" help:"Base URL of an OpenAI-compatible embeddings endpoint (POST <url>/v1/embeddings): http://localhost:11434 (Ollama), https://api.openai.com (OpenAI), a llama.cpp, vLLM, TEI or LM Studio server. With --embeddings-model, tool_search ranks each query by its keywords and its vector fused; deferred tools are embedded once per model and tool contract in the background and cached in the <PREFIX>_EMBEDDINGS bucket. Empty: keywords only."`
	EmbeddingsModel          string        `name:"embeddings-model" env:"ENGINE_EMBEDDINGS_MODEL" help:"Embedding model's name as the endpoint knows it, e.g. nomic-embed-text (Ollama) or text-embedding-3-small (OpenAI). Vectors are cached under it: give a changed model a new name."`
	EmbeddingsAPIKey         string        `name:"embeddings-api-key" env:"ENGINE_EMBEDDINGS_API_KEY" help:"Bearer token for the endpoint (OpenAI's API key); prefer the environment variable. Empty: no Authorization header (Ollama, local servers)."`
	EmbeddingsQueryTimeout   time.Duration `name:"embeddings-query-timeout" env:"ENGINE_EMBEDDINGS_QUERY_TIMEOUT" default:"200ms" help:"Deadline of a query's embedding at search time; past it (or while the endpoint is down) the search ranks by keywords and its note says so."`
	EmbeddingsBatch          int           `name:"embeddings-batch" env:"ENGINE_EMBEDDINGS_BATCH" default:"128" help:"Tool texts per embedding request (1 to 2048)."`
	EmbeddingsQueryPrefix    string        `name:"embeddings-query-prefix" env:"ENGINE_EMBEDDINGS_QUERY_PREFIX" help:"Text put before each query, for models trained with one (nomic-embed-text: 'search_query: ')."`
	EmbeddingsDocumentPrefix string        `name:"embeddings-document-prefix" env:"ENGINE_EMBEDDINGS_DOCUMENT_PREFIX" help:"Text put before each tool's text (nomic-embed-text: 'search_document: '); part of the cache key."`
}

// config maps the flags to the provider's configuration (the server
// validates it).
func (f embeddingFlags) config() embedding.Config {
	return embedding.Config{
		URL: f.EmbeddingsURL, Model: f.EmbeddingsModel, APIKey: f.EmbeddingsAPIKey,
		QueryTimeout: f.EmbeddingsQueryTimeout, BatchSize: f.EmbeddingsBatch,
		QueryPrefix: f.EmbeddingsQueryPrefix, DocumentPrefix: f.EmbeddingsDocumentPrefix,
	}
}
