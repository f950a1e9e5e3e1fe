package client

import (
	"time"

	"github.com/toolintent/engine/wire"
)

// The request and reply types are the wire package's (one definition
// shared with the engine); these names keep the client's API.
type (
	// AppendRequest is wire.AppendRequest.
	AppendRequest = wire.AppendRequest
	// IntentRequest is wire.IntentRequest.
	IntentRequest = wire.IntentRequest
	// ResolveRequest is wire.ResolveRequest.
	ResolveRequest = wire.ResolveRequest
	// HistoryRequest is wire.HistoryRequest.
	HistoryRequest = wire.HistoryRequest
	// ExplainRequest is wire.ExplainRequest.
	ExplainRequest = wire.ExplainRequest
	// ExplainBatchRequest asks explain for many tools at once.
	ExplainBatchRequest = wire.ExplainBatchRequest
	// ResumeRequest is wire.ResumeRequest.
	ResumeRequest = wire.ResumeRequest
	// BeginTurnRequest is wire.BeginTurnRequest.
	BeginTurnRequest = wire.BeginTurnRequest
	// DiscoverRequest is wire.DiscoverRequest.
	DiscoverRequest = wire.DiscoverRequest
	// DispatchRequest is wire.DispatchRequest.
	DispatchRequest = wire.DispatchRequest
	// TurnRequest is wire.TurnRequest.
	TurnRequest = wire.TurnRequest
	// DeleteRequest deletes (or erases) a session.
	DeleteRequest = wire.DeleteRequest
	// CompactRequest compacts a session.
	CompactRequest = wire.CompactRequest
	// CompactReply is wire.CompactReply.
	CompactReply = wire.CompactReply
	// CallCheckRequest is wire.CallCheckRequest.
	CallCheckRequest = wire.CallCheckRequest
	// CallCheckReply is wire.CallCheckReply.
	CallCheckReply = wire.CallCheckReply
	// Grant is wire.Grant.
	Grant = wire.Grant
	// RegistryDiffRequest is wire.RegistryDiffRequest.
	RegistryDiffRequest = wire.RegistryDiffRequest
	// RegistryImpact is wire.RegistryImpact.
	RegistryImpact = wire.RegistryImpact
	// RegistryDiff is wire.RegistryDiff.
	RegistryDiff = wire.RegistryDiff
	// ToolChange is wire.ToolChange.
	ToolChange = wire.ToolChange
	// CheckpointLoss is wire.CheckpointLoss.
	CheckpointLoss = wire.CheckpointLoss
	// Override is wire.Override.
	Override = wire.Override
	// Intent is wire.Intent.
	Intent = wire.Intent
	// Command is wire.Command.
	Command = wire.Command
	// AppendReply is wire.AppendReply.
	AppendReply = wire.AppendReply
	// Session is wire.Session.
	Session = wire.Session
	// Rejection is wire.Rejection.
	Rejection = wire.Rejection
	// Checkpoint is wire.Checkpoint.
	Checkpoint = wire.Checkpoint
	// ContractEntry is wire.ContractEntry.
	ContractEntry = wire.ContractEntry
	// TurnView is wire.TurnView.
	TurnView = wire.TurnView
	// Budget is wire.Budget.
	Budget = wire.Budget
	// Classification is wire.Classification.
	Classification = wire.Classification
	// History is wire.History.
	History = wire.History
	// HistoryEntry is wire.HistoryEntry.
	HistoryEntry = wire.HistoryEntry
	// EventRef is wire.EventRef.
	EventRef = wire.EventRef
	// Explanation is wire.Explanation.
	Explanation = wire.Explanation
	// ExplainBatchReply is one Explanation per requested tool.
	ExplainBatchReply = wire.ExplainBatchReply
	// DiscoverReply is wire.DiscoverReply.
	DiscoverReply = wire.DiscoverReply
	// Tool is wire.Tool.
	Tool = wire.Tool
	// Match is wire.Match.
	Match = wire.Match
	// DispatchRecord is wire.DispatchRecord.
	DispatchRecord = wire.DispatchRecord
	// CheckpointReply is wire.CheckpointReply.
	CheckpointReply = wire.CheckpointReply
	// DeleteReply is the outcome of Delete.
	DeleteReply = wire.DeleteReply
	// ResumeReply is wire.ResumeReply.
	ResumeReply = wire.ResumeReply
	// ResumeOutcome is wire.ResumeOutcome.
	ResumeOutcome = wire.ResumeOutcome
	// ResumeDecision is wire.ResumeDecision.
	ResumeDecision = wire.ResumeDecision
	// ContractChange is wire.ContractChange.
	ContractChange = wire.ContractChange
	// SessionList is wire.SessionList.
	SessionList = wire.SessionList
	// RegistryInfo is wire.RegistryInfo.
	RegistryInfo = wire.RegistryInfo
	// RegistryTool is wire.RegistryTool.
	RegistryTool = wire.RegistryTool
	// Profile is wire.Profile.
	Profile = wire.Profile
	// BudgetTable is wire.BudgetTable.
	BudgetTable = wire.BudgetTable
	// TokenCount is wire.TokenCount.
	TokenCount = wire.TokenCount
	// Until is wire.Until.
	Until = wire.Until
)

// UntilSeq bounds a history or an explanation at a sequence.
func UntilSeq(seq uint64) Until { return wire.UntilSeq(seq) }

// Command builders of Append: Command is an object with a "type" and that
// type's fields.

// Enable switches tools on (ToolsToggled enabled=true).
func Enable() Command { return Command{"type": "ToolsToggled", "enabled": true} }

// Disable switches every tool off (ToolsToggled enabled=false).
func Disable() Command { return Command{"type": "ToolsToggled", "enabled": false} }

// Follow makes the session follow the agent profile (ToolsToggled
// enabled=null).
func Follow() Command { return Command{"type": "ToolsToggled", "enabled": nil} }

// WebSearch sets the web_search overlay: true, false, or nil (unset).
func WebSearch(on *bool) Command {
	var v any
	if on != nil {
		v = *on
	}
	return Command{"type": "WebSearchSet", "enabled": v}
}

// WebSearchOn turns the web_search overlay on: WebSearch without a pointer.
func WebSearchOn() Command { return Command{"type": "WebSearchSet", "enabled": true} }

// WebSearchOff turns the web_search overlay off.
func WebSearchOff() Command { return Command{"type": "WebSearchSet", "enabled": false} }

// WebSearchUnset unsets the web_search overlay (the profile decides).
func WebSearchUnset() Command { return Command{"type": "WebSearchSet", "enabled": nil} }

// Preset chooses a preset ("" unsets it).
func Preset(name string) Command { return Command{"type": "PresetChosen", "preset": name} }

// DisableTool switches one tool (or a name pattern) off by hand.
func DisableTool(name string) Command { return Command{"type": "ToolDisabled", "name": name} }

// EnableTool undoes DisableTool.
func EnableTool(name string) Command { return Command{"type": "ToolEnabled", "name": name} }

// Pick sets a short curated list (at most 16 names, in this order).
func Pick(names ...string) Command { return Command{"type": "ToolsPicked", "names": names} }

// Unpick unsets the picked list.
func Unpick() Command { return Command{"type": "ToolsPicked", "names": nil} }

// UntilTime bounds a history or an explanation at a time.
func UntilTime(t time.Time) Until { return wire.UntilTime(t) }
