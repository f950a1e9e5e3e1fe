package client

import "context"

// The methods below are the names the client used before its methods took
// the operations' names (docs/api.md); each calls its successor.

// BeginTurn is TurnBegin.
//
// Deprecated: use TurnBegin.
func (c *Client) BeginTurn(ctx context.Context, req BeginTurnRequest) (TurnView, error) {
	return c.TurnBegin(ctx, req)
}

// Discover is TurnDiscover.
//
// Deprecated: use TurnDiscover.
func (c *Client) Discover(ctx context.Context, req DiscoverRequest) (DiscoverReply, error) {
	return c.TurnDiscover(ctx, req)
}

// Dispatch is TurnDispatch.
//
// Deprecated: use TurnDispatch.
func (c *Client) Dispatch(ctx context.Context, req DispatchRequest) (TurnView, error) {
	return c.TurnDispatch(ctx, req)
}

// LastDispatch is TurnInspect.
//
// Deprecated: use TurnInspect.
func (c *Client) LastDispatch(ctx context.Context, req TurnRequest) (DispatchRecord, error) {
	return c.TurnInspect(ctx, req)
}

// Checkpoint is TurnCheckpoint.
//
// Deprecated: use TurnCheckpoint.
func (c *Client) Checkpoint(ctx context.Context, req TurnRequest) (CheckpointReply, error) {
	return c.TurnCheckpoint(ctx, req)
}

// EndTurn is TurnEnd.
//
// Deprecated: use TurnEnd.
func (c *Client) EndTurn(ctx context.Context, req TurnRequest) (CheckpointReply, error) {
	return c.TurnEnd(ctx, req)
}

// CallCheck is TurnCallCheck with the request's two fields as arguments.
//
// Deprecated: use TurnCallCheck.
func (c *Client) CallCheck(ctx context.Context, session, tool string) (CallCheckReply, error) {
	return c.TurnCallCheck(ctx, CallCheckRequest{Session: session, Tool: tool})
}

// Compact is SessionCompact.
//
// Deprecated: use SessionCompact.
func (c *Client) Compact(ctx context.Context, req CompactRequest) (CompactReply, error) {
	return c.SessionCompact(ctx, req)
}

// Delete is SessionDelete.
//
// Deprecated: use SessionDelete.
func (c *Client) Delete(ctx context.Context, req DeleteRequest) (DeleteReply, error) {
	return c.SessionDelete(ctx, req)
}
