package service

// Discover: tool_search inside a frozen turn, the loads it records and the
// output it returns.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// DiscoverRequest is one tool_search call inside the open turn.
type DiscoverRequest struct {
	// Search is the model's tool_search input (deferral.ParseSearchInput),
	// with the query's embedding when the backend gives one
	// (QueryVector, never part of the model's input).
	Search deferral.SearchRequest
	// Provider selects the rendering of the view and of Output.
	Provider string
	// CallID is the provider's id of the tool_search call, written into
	// an OpenAI tool_search_output item ("" leaves it out).
	CallID string
	// NoView leaves the turn's next provider request out of the result:
	// View then carries the session, turn, intent, loaded tools and
	// contract only, its lists empty (searchView). Rendering the view of
	// a large turn costs more than the search (1.6 MB of JSON at 10,000
	// tools).
	NoView bool
}

// Discover is tool_search inside the open turn: it finds tools
// by exact name, keyword query or regex, loads the deferred ones
// (recorded as DeferredLoaded) so that the next provider request of the
// turn includes them, and reports unknown names as not found without
// failing. Output is the tool result for the provider: the full schemas
// (anthropic, openai), tool_reference blocks (anthropic-native), or a
// tool_search_output item (openai-native). Only a request outside the
// tool_search schema is ErrInvalid.
//
// A search never loads a tool the session has disabled, even one the turn
// froze before it was disabled: it is reported not found, and
// a disable stored between the search and its DeferredLoaded makes the
// engine search again. A keyword query loads only its confident matches
// (deferral.ConfidentShare), at most max_results. A query with a query
// vector, against tools with embeddings, ranks by keywords and vector
// fused; a vector of another dimension than the embeddings is
// ErrInvalid. With an embedder (SetEmbedder) a query without a vector
// ranks by its keywords and its vector from the operator's model fused;
// when that vector or the tools' are not to be had, by keywords, and the
// note says why.
func (e *Engine) Discover(ctx context.Context, session string, origin Origin, req DiscoverRequest) (wire.DiscoverReply, error) {
	for attempt := 0; ; attempt++ {
		out, err := e.discover(ctx, session, origin, req)
		if errors.Is(err, aggregate.ErrToolDisabled) && attempt < e.cfg.MaxRetries {
			continue // disabled meanwhile: the turn was dropped, search the log's turn again
		}
		return out, err
	}
}

// discover is one attempt of Discover.
func (e *Engine) discover(ctx context.Context, session string, origin Origin, req DiscoverRequest) (wire.DiscoverReply, error) {
	if err := validProvider(req.Provider); err != nil {
		return wire.DiscoverReply{}, err
	}
	if err := req.Search.Validate(); err != nil {
		return wire.DiscoverReply{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	st, err := e.latest(ctx, session, 0)
	if err != nil {
		return wire.DiscoverReply{}, err
	}
	var out wire.DiscoverReply
	settled := true
	// One search at a time per turn, so that the turn loads in the order
	// the log stores the loads.
	err = e.withTurn(ctx, st, func(ot *openTurn, now aggregate.State) error {
		st = now
		search := req.Search
		var embedNote string
		if search.Query != "" && len(search.QueryVector) == 0 {
			search.Embedded, embedNote = e.embeddedSearch(ctx, ot, search.Query)
		}
		// A full loaded set loads what fits, never an error.
		sr, err := ot.turn.SearchWithin(search, now.Intent.Disabled, max(deferral.MaxLoaded-len(now.Loaded), 0))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if embedNote != "" {
			sr.Note = strings.TrimPrefix(sr.Note+"; "+embedNote, "; ")
		}
		out = wire.DiscoverReply{Tools: mapped(sr.Tools, wireTool), Loaded: sr.Loaded, NotFound: sr.NotFound, Matches: sr.Matches, Note: sr.Note, Output: discoverOutput(sr, ot.res, req)}
		if len(sr.Loaded) > 0 {
			res, err := e.Apply(ctx, session, origin, nil, events.DeferredLoaded{Names: sr.Loaded, Turn: ot.turn.Number()})
			if err != nil {
				e.ts.turns.Remove(session) // the turn loaded what the log may not hold
				return err
			}
			st = res.State
			settled = e.settled(session, ot, res.First, res.Last)
		}
		if settled {
			out.View = e.discoverView(st, ot, req)
		}
		return nil
	})
	if err != nil || settled {
		return out, err
	}
	// Another engine wrote in between: the log's order wins.
	err = e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
		out.View = e.discoverView(st, ot, req)
		return nil
	})
	return out, err
}

// discoverView is the view a search returns: the turn's next provider
// request, or with NoView its identity alone (session, sequence, turn,
// intent, loaded tools, contract), every list empty.
func (e *Engine) discoverView(st aggregate.State, ot *openTurn, req DiscoverRequest) wire.TurnView {
	if !req.NoView {
		return e.frozenView(st, ot, req.Provider).TurnView
	}
	row, _ := deferral.LookupProvider(req.Provider)
	return wire.TurnView{
		Session: st.Session, Seq: st.LastSeq, Turn: ot.turn.Number(), Frozen: true, Intent: st.Intent, Source: ot.res.Source,
		Tools: []string{}, Provider: []string{}, Catalog: []string{}, Rendering: json.RawMessage("[]"), RenderedFor: row.Name,
		ContractHash: ot.res.ContractHash, RegistryVersion: ot.res.RegistryVersion, Classification: []wire.Classification{}, Loaded: ot.turn.Loaded(),
		Policy: ot.res.Policy,
	}
}

// discoverOutput renders the tool result of a search for the provider
// (its row's search output; the request's provider is validated).
func discoverOutput(sr deferral.SearchResult, res *resolver.Resolution, req DiscoverRequest) json.RawMessage {
	row, _ := deferral.LookupProvider(req.Provider)
	return row.Output(sr, res, req.CallID)
}
