package deferral

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// Turn is one turn's frozen tool set and its loaded deferred set.
//
// Freeze copies the resolved tools, so nothing done to the registry or the
// resolution afterwards changes the turn. The loaded set is owned by the
// Turn and changes only through Search (tool_search), which may only load
// deferred tools of the frozen set; the next Request then carries their
// real schemas in Split.Provider.
//
// A Turn is safe for concurrent use: a tool goroutine may call Search while
// the provider goroutine calls Request, Lookup, Loaded or Discovered. A
// mutex guards the loaded set; the frozen tools never change, so Lookup
// takes no lock. Returned tools share the Turn's Parameters bytes; treat
// them as read-only.
type Turn struct {
	number uint64
	*frozen

	mu         sync.Mutex
	initial    []string            // deferred tools loaded when the turn was frozen, in the given order
	loaded     map[string]struct{} // deferred tools of this turn that are loaded
	discovered []string            // loaded by Search in this turn, in load order
	catalog    *frozenCatalog      // the catalog as the turn began, rendered on the first Request

	index      *Index // the registry's index given to FreezeIndexed, or nil
	searchOnce sync.Once
	search     *toolsearch.Index  // the index searches use
	filter     *toolsearch.Filter // the turn's deferred tools in search
}

// Freeze starts turn number turn from a resolution and the session's loaded
// deferred tools, in the order they were loaded (the
// request renders them in this order, so a turn begins with the array the
// previous turn ended with). The tools are deep-copied. Of loaded, only
// names of deferred tools in the frozen set are kept; other names (a tool
// disabled this turn, gone from the registry, or resident) have no effect
// on this turn and are not reported by Loaded. A nil res freezes an empty
// turn.
func Freeze(turn uint64, res *resolver.Resolution, loaded []string) *Turn {
	return FreezeIndexed(turn, res, loaded, nil)
}

// FreezeIndexed is Freeze with the search index of the registry that
// resolved res (IndexFor), so that a search of a large registry costs no
// index build. idx must come from that same registry; nil builds a small
// index of the turn's own deferred tools on the first search.
func FreezeIndexed(turn uint64, res *resolver.Resolution, loaded []string, idx *Index) *Turn {
	t := &Turn{number: turn, loaded: make(map[string]struct{}, len(loaded)), index: idx}
	if res == nil {
		t.frozen = &frozen{}
		return t
	}
	t.frozen = freezeShared(res)
	for _, name := range loaded {
		if i, ok := t.byName[name]; ok && t.tools[i].Deferred {
			if _, dup := t.loaded[name]; !dup {
				t.loaded[name] = struct{}{}
				t.initial = append(t.initial, name)
			}
		}
	}
	return t
}

// Number returns the turn number given to Freeze.
func (t *Turn) Number() uint64 { return t.number }

// RegistryVersion returns the registry version of the frozen resolution.
func (t *Turn) RegistryVersion() string { return t.registryVersion }

// ContractHash returns the contract hash of the frozen resolution; a
// checkpoint recorded from this turn carries it.
func (t *Turn) ContractHash() string { return t.contractHash }

// Tools returns the frozen tools in resolution order, as a fresh slice.
func (t *Turn) Tools() []resolver.Tool { return slices.Clone(t.tools) }

// Lookup returns the turn's frozen tool named name, with its Permission.
// Execution always goes through this tool, never through a later registry.
// A deferred tool that is not loaded is still found: whether the
// model may call it is the provider array's business, not the executor's.
func (t *Turn) Lookup(name string) (resolver.Tool, bool) {
	i, ok := t.byName[name]
	if !ok {
		return resolver.Tool{}, false
	}
	return t.tools[i], true
}

// frozenCatalog is a turn's catalog text: every deferred tool of the
// turn, so a discovery does not change the text sent in the system prompt.
type frozenCatalog struct {
	text    string
	grouped bool
	tokens  int
}

// Request returns the split for the next provider request of this turn
// : the frozen split (resident tools in resolution order,
// then the deferred tools loaded when the turn was frozen, in the order
// given to Freeze), followed by the tools Search loaded in this turn, in
// load order. A discovered tool is appended after
// the frozen array, never sorted into it, so the array sent before it is a
// prefix of the array sent after it; it leaves the catalog. Its
// Classification is the dispatch record. Without a Search in between,
// two Requests give equal Splits, so the provider array stays stable.
// Frozen counts the resident tools. CatalogText lists every deferred tool
// of the turn, loaded or not: a discovered tool leaves
// Catalog but not the text, so the system prompt keeps its bytes within
// the turn and across turns of the same intent and registry; loading a
// loaded tool again is a no-op.
func (t *Turn) Request() Split {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := splitTools(t.tools, nil)
	s.Frozen = len(s.Provider)
	if t.catalog == nil {
		// Every deferred tool of the turn, loaded or not.
		text, grouped, tokens := RenderCatalog(s.Catalog, t.namespaces, t.catalogMax)
		t.catalog = &frozenCatalog{text: text, grouped: grouped, tokens: tokens}
	}
	if len(t.initial)+len(t.discovered) > 0 {
		for _, names := range [2][]string{t.initial, t.discovered} {
			for _, name := range names {
				i := t.byName[name]
				s.Provider = append(s.Provider, t.tools[i])
				s.Classification[i].Loaded = true
			}
		}
		catalog := s.Catalog[:0:0]
		for _, name := range s.Catalog {
			if _, ok := t.loaded[name]; !ok {
				catalog = append(catalog, name)
			}
		}
		s.Catalog = catalog
	}
	s.CatalogText, s.CatalogGrouped, s.catalogTokens, s.catalogFixed = t.catalog.text, t.catalog.grouped, t.catalog.tokens, true
	return s
}

// Index returns the registry's search index the turn was frozen with
// (FreezeIndexed), or nil: the index whose tools vectors computed for a
// search (Embedded) must be of.
func (t *Turn) Index() *Index { return t.index }

// Loaded returns the loaded deferred tools of this turn, sorted, as a fresh
// slice: those kept from Freeze plus those Search loaded.
func (t *Turn) Loaded() []string {
	t.mu.Lock()
	out := make([]string, 0, len(t.loaded))
	for name := range t.loaded {
		out = append(out, name)
	}
	t.mu.Unlock()
	slices.Sort(out) // the map order never reaches the output
	return out
}

// IsLoaded reports whether name is a loaded deferred tool of this turn
// (kept from Freeze or loaded by Search).
func (t *Turn) IsLoaded(name string) bool {
	t.mu.Lock()
	_, ok := t.loaded[name]
	t.mu.Unlock()
	return ok
}

// Discovered returns the names Search loaded during this turn, in load
// order, as a fresh slice: the names of the turn's DeferredLoaded event.
func (t *Turn) Discovered() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.discovered)
}

// Search is tool_search: it finds tools of this turn's frozen
// set by exact name, by a keyword query ranked by BM25, or by a regular
// expression (any combination; names first), loads the deferred ones
// among them and returns their full parameter schemas; of a query's
// matches only the confident ones (ConfidentShare) are loaded and
// returned, the others are listed as Weak. Queries and regexes
// search only the turn's deferred tools (loaded or not); names may also
// name resident tools, whose schemas are returned without loading
// anything. The next Request appends the newly loaded tools after the
// frozen array and drops them from Catalog. Loading a loaded tool is a
// no-op that still returns its schema.
//
// Names not in the frozen set are reported in NotFound and are not an
// error; a query that matches nothing or a regex that does not compile is
// a Note. Only a request outside the tool_search schema is an error
// (ErrInvalidSearch), and then nothing is loaded.
func (t *Turn) Search(req SearchRequest) (SearchResult, error) {
	return t.SearchExcluding(req, nil)
}

// ConfidentShare is the share of the best keyword score a query match
// needs to be loaded: a query loads its best match and every
// match scoring at least ConfidentShare of it, at most max_results; the
// weaker matches are listed in Matches with Weak set and named in the
// Note, so the model can load one by name, but they are neither loaded
// nor returned. The rule depends only on the scores, so it is
// deterministic. Regex matches are not ranked by relevance and all load.
const ConfidentShare = 0.7

// SearchExcluding is Search that never returns or loads a tool named in
// excluded, a sorted set (the session's disabled tools): a
// requested name in it is reported in NotFound with a note, and query and
// regex matches skip it. A tool loaded before it was excluded stays
// loaded for the rest of the turn (the turn is frozen); it is only not
// found again.
func (t *Turn) SearchExcluding(req SearchRequest, excluded []string) (SearchResult, error) {
	return t.SearchWithin(req, excluded, -1)
}

// SearchWithin is SearchExcluding that loads at most room tools not yet
// loaded (room < 0: no bound), so that the session's loaded set stays
// within its bound: the tools found beyond it are neither
// loaded nor returned, and the Note names them and says that they load
// in a later turn, after the loaded set is evicted to LoadedBound. A full
// loaded set is never an error.
func (t *Turn) SearchWithin(req SearchRequest, excluded []string, room int) (SearchResult, error) {
	if err := req.Validate(); err != nil {
		return SearchResult{}, err
	}
	vectorNote, err := t.queryVectorNote(req)
	if err != nil {
		return SearchResult{}, err
	}
	isExcluded := func(name string) bool {
		_, found := slices.BinarySearch(excluded, name)
		return found
	}
	var res SearchResult
	var notes []string
	var disabled []string
	seen := make(map[string]struct{}, len(req.Names)+req.limit())
	var picked []int // positions in t.tools, in result order
	for _, name := range req.Names {
		if _, dup := seen[name]; dup {
			continue
		}
		seen[name] = struct{}{}
		i, ok := t.byName[name]
		if !ok || isExcluded(name) {
			res.NotFound = append(res.NotFound, name)
			if ok {
				disabled = append(disabled, name)
			}
			continue
		}
		picked = append(picked, i)
	}
	var weak []string
	if req.Query != "" || req.Regex != "" {
		hits, via, isWeak, hitNotes := t.searchHits(req, len(excluded), isExcluded)
		notes = append(notes, hitNotes...)
		k := req.limit()
		matched := 0
		for j, h := range hits {
			if matched == k {
				break
			}
			if _, dup := seen[h.Name]; dup {
				continue
			}
			i, ok := t.byName[h.Name]
			if !ok {
				continue
			}
			seen[h.Name] = struct{}{}
			matched++
			res.Matches = append(res.Matches, Match{Name: h.Name, Via: via[j], Score: min(h.Score, math.MaxFloat64), Weak: isWeak[j]})
			if isWeak[j] {
				weak = append(weak, h.Name)
				continue
			}
			picked = append(picked, i)
		}
	}
	if vectorNote != "" {
		notes = append(notes, vectorNote)
	}
	if len(req.Names) == 0 && req.Query == "" && req.Regex == "" {
		notes = append(notes, "nothing to search: pass names from the catalog, a query of keywords, or a regex")
	}
	if len(disabled) > 0 {
		notes = append(notes, fmt.Sprintf("disabled in this session: %s; it cannot be loaded until the user enables it", quoteList(disabled)))
	}
	if len(res.NotFound) > len(disabled) {
		var missing []string
		for _, n := range res.NotFound {
			if !slices.Contains(disabled, n) {
				missing = append(missing, n)
			}
		}
		notes = append(notes, fmt.Sprintf("not found in this turn's tools: %s; load only names from the deferred-tool catalog, or search with a query", quoteList(missing)))
	}
	if len(weak) > 0 {
		notes = append(notes, fmt.Sprintf("also matched, less closely, and not loaded: %s; load one by name if it is needed", quoteList(weak)))
	}
	full := t.load(picked, room, &res)
	if len(full) > 0 {
		notes = append(notes, fmt.Sprintf("the session's loaded tools are at their bound for this turn, not loaded: %s; search for it again in the next turn, which unloads the tools loaded longest ago", quoteList(full)))
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}

// queryVectorNote checks a request's query vector against the tools'
// embeddings: one of another dimension is refused before anything loads;
// without tool embeddings, or without a query, it is unused and the note
// says so.
func (t *Turn) queryVectorNote(req SearchRequest) (string, error) {
	if len(req.QueryVector) == 0 {
		return "", nil
	}
	var vectorNote string
	ix, _ := t.searchIndex()
	dim := t.embeddingDim(ix)
	switch {
	case dim == 0:
		vectorNote = "this registry carries no tool embeddings; ranked by keywords"
	case !ix.HasVectors():
		vectorNote = "no deferred tool of this turn carries an embedding; ranked by keywords"
	case req.Query == "":
		vectorNote = "query_vector ranks a query only; it was not used"
	}
	if err := queryVectorError(req.QueryVector, dim); err != nil {
		return "", err
	}
	return vectorNote, nil
}

// searchHits runs a request's query and regex over the turn's deferred
// tools: the hits in order (query first), how each was found, whether
// each is a weak match (not loaded), and notes for the caller. Each
// search asks for excluded more hits than the limit, as excluded ones
// are dropped.
func (t *Turn) searchHits(req SearchRequest, excluded int, isExcluded func(string) bool) (hits []toolsearch.Hit, via []string, isWeak []bool, notes []string) {
	ix, filter := t.searchIndex()
	k := req.limit()
	if req.Query != "" {
		var qh []toolsearch.Hit
		em := req.Embedded
		if len(req.QueryVector) > 0 || em == nil {
			em = nil // a caller's vector ranks by the registry's embeddings
		} else if !em.Vectors.Of(ix) || len(em.Query) != em.Vectors.Dim() {
			notes = append(notes, "the engine's tool embeddings do not cover this turn's tools; ranked by keywords")
			em = nil
		}
		if len(req.QueryVector) > 0 && ix.HasVectors() {
			var weakQ []bool
			qh, weakQ = fusedHits(ix.FusedRanked(req.Query, req.QueryVector, k+excluded, filter), isExcluded)
			isWeak = append(isWeak, weakQ...)
		} else if em != nil {
			var weakQ []bool
			qh, weakQ = fusedHits(ix.FusedRankedWith(req.Query, em.Query, em.Vectors, k+excluded, filter), isExcluded)
			isWeak = append(isWeak, weakQ...)
		} else {
			qh = withoutExcluded(ix.Keyword(req.Query, k+excluded, filter), isExcluded)
			for j, h := range qh {
				isWeak = append(isWeak, j > 0 && h.Score < ConfidentShare*qh[0].Score)
			}
		}
		for _, h := range qh {
			hits = append(hits, h)
			via = append(via, "query")
		}
		if len(qh) == 0 {
			notes = append(notes, fmt.Sprintf("no deferred tool matched the query %q; try other keywords, or a regex", req.Query))
		}
	}
	if req.Regex != "" {
		rh, err := ix.Regex(req.Regex, k+excluded, filter)
		rh = withoutExcluded(rh, isExcluded)
		if err != nil {
			notes = append(notes, fmt.Sprintf("regex not used: %v", err))
		} else if len(rh) == 0 {
			notes = append(notes, fmt.Sprintf("no deferred tool matched the regex %q", req.Regex))
		}
		hits = append(hits, rh...)
		for range rh {
			via = append(via, "regex")
			isWeak = append(isWeak, false)
		}
	}
	return hits, via, isWeak, notes
}

// load adds the picked tools to res: a deferred tool not loaded yet is
// loaded while room allows (room < 0: no bound); the ones beyond it are
// returned, not loaded.
func (t *Turn) load(picked []int, room int, res *SearchResult) (full []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range picked {
		tool := t.tools[i]
		if !tool.Deferred {
			res.Tools = append(res.Tools, tool)
			continue
		}
		if _, was := t.loaded[tool.Name]; !was {
			if room >= 0 && len(res.Loaded) >= room {
				full = append(full, tool.Name)
				continue
			}
			t.loaded[tool.Name] = struct{}{}
			t.discovered = append(t.discovered, tool.Name)
			res.Loaded = append(res.Loaded, tool.Name)
		}
		res.Tools = append(res.Tools, tool)
	}
	return full
}

// fusedHits takes a query's hits ranked by reciprocal rank fusion of its
// keywords and a vector (the caller's or the engine's), drops the
// excluded ones, and marks each hit weak (listed, not loaded) unless it
// is the first, a confident keyword match (ConfidentShare of the best
// keyword score among the hits) or the nearest tool by vector among the
// hits: fusion scores are close together, so their ratio says nothing
// about confidence, and a vector ranking ranks every tool that has a
// vector.
func fusedHits(ranked []toolsearch.FusedHit, excluded func(string) bool) ([]toolsearch.Hit, []bool) {
	fh := slices.DeleteFunc(ranked, func(h toolsearch.FusedHit) bool { return excluded(h.Name) })
	bestKW, bestSem := 0.0, 0
	for _, h := range fh {
		if h.KeywordRank > 0 && h.KeywordScore > bestKW {
			bestKW = h.KeywordScore
		}
		if h.SemanticRank > 0 && (bestSem == 0 || h.SemanticRank < bestSem) {
			bestSem = h.SemanticRank
		}
	}
	hits := make([]toolsearch.Hit, len(fh))
	weak := make([]bool, len(fh))
	for j, h := range fh {
		hits[j] = h.Hit
		confident := j == 0 ||
			h.KeywordRank > 0 && h.KeywordScore >= ConfidentShare*bestKW ||
			h.SemanticRank > 0 && h.SemanticRank == bestSem
		weak[j] = !confident
	}
	return hits, weak
}

// embeddingDim is the dimension of the tool embeddings this turn
// searches: the search index's, or, when its tools have none, that of
// any frozen tool (resident ones included); 0 without embeddings.
func (t *Turn) embeddingDim(ix *toolsearch.Index) int {
	if d := ix.Dim(); d > 0 {
		return d
	}
	for i := range t.tools {
		if n := len(t.tools[i].Embedding); n > 0 {
			return n
		}
	}
	return 0
}

// withoutExcluded drops the hits of excluded names (in place).
func withoutExcluded(hits []toolsearch.Hit, excluded func(string) bool) []toolsearch.Hit {
	return slices.DeleteFunc(hits, func(h toolsearch.Hit) bool { return excluded(h.Name) })
}

// Load is Search for exact names only.
func (t *Turn) Load(names ...string) SearchResult {
	if len(names) > MaxSearchNames {
		names = names[:MaxSearchNames]
	}
	res, _ := t.Search(SearchRequest{Names: names})
	return res
}

// searchIndex returns the index searches use and the filter admitting the
// turn's deferred tools, built once per turn: the registry's index with
// the filter of the turn's frozen set (shared by the turns of that set),
// or, when the registry's index lacks one of the tools, an index of the
// deferred tools alone.
func (t *Turn) searchIndex() (*toolsearch.Index, *toolsearch.Filter) {
	t.searchOnce.Do(func() {
		if t.index != nil {
			if f, ok := t.deferredFilter(t.index.ix); ok {
				t.search, t.filter = t.index.ix, f
				return
			}
		}
		var deferred []resolver.Tool
		for i := range t.tools {
			if t.tools[i].Deferred {
				deferred = append(deferred, t.tools[i])
			}
		}
		t.search = toolsearch.Build(docsOf(deferred, t.namespaces), nil) // holds only deferred tools: no filter
	})
	return t.search, t.filter
}

// quoteList renders names as "a", "b".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
