package checkpoint

// The size of an event that carries a checkpoint (a TurnEnded with its
// checkpoint, or a CheckpointRecorded) is bounded by what the turn loaded,
// whatever the registry holds: a fixed part (the envelope with the longest
// session id, channel, actor and registry version the codec accepts, the
// contract hash and the keys) plus, per loaded tool, its name in
// loaded_deferred_tools and its contract entry (the name and its 64-digit
// hash). With the loaded set at its bound (events.MaxListLen) the event
// stays under events.MaxEventBytes.
const (
	// SizeFixed bounds the encoded bytes of a checkpoint event without
	// loaded tools.
	SizeFixed = 1280
	// SizePerTool bounds the encoded bytes one loaded tool adds.
	SizePerTool = 210
)

// SizeBound returns the most bytes an encoded event carrying a checkpoint
// of loaded tools takes: SizeFixed + SizePerTool per loaded tool.
func SizeBound(loaded int) int { return SizeFixed + SizePerTool*loaded }
