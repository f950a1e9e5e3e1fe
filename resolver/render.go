package resolver

// emptySchema is rendered for a tool built without parameters.
const emptySchema = `{"properties":{},"type":"object"}`

func schemaBytes(t *Tool) []byte {
	if len(t.Parameters) == 0 {
		return []byte(emptySchema)
	}
	return t.Parameters
}

func renderSize(tools []Tool, perTool int) int {
	n := 2
	for i := range tools {
		n += perTool + len(tools[i].Name) + len(tools[i].Description) + len(tools[i].Parameters) + len(emptySchema)
	}
	return n
}

// RenderAnthropic renders tools as an Anthropic Messages API "tools" array:
//
//	[{"name":...,"description":...,"input_schema":{...}}, ...,
//	 {"name":...,"description":...,"input_schema":{...},"cache_control":{"type":"ephemeral"}}]
//
// The cache breakpoint sits on the last tool only, so the whole array is
// one cached prefix. Keys are in a fixed order, strings are escaped by one
// fixed rule and parameters are written as stored (canonical for registry
// tools), so identical input gives identical bytes. A tool without
// parameters gets {"properties":{},"type":"object"}. No tools gives [].
// A tool with a native Anthropic form (Tool.Native, seed §8) is emitted as
// that server tool object instead, e.g.
// {"max_uses":5,"name":"web_search","type":"web_search_20250305"}, with the
// cache breakpoint appended when it is last.
func RenderAnthropic(tools []Tool) []byte {
	return RenderAnthropicFrozen(tools, len(tools))
}

// RenderAnthropicFrozen is RenderAnthropic with the cache breakpoint on
// tool frozen-1 instead of the last tool (the engine-side mode keeps
// the breakpoint on the turn's frozen array, so that tools appended by a
// discovery change no byte before them). frozen outside 1..len(tools)
// puts it on the last tool.
func RenderAnthropicFrozen(tools []Tool, frozen int) []byte {
	bp := len(tools) - 1
	if frozen >= 1 && frozen <= len(tools) {
		bp = frozen - 1
	}
	return renderArray(tools, 96, func(b []byte, i int, t *Tool) []byte {
		if native := t.Native.Anthropic; len(native) > 0 {
			// The server tool object as the registry gives it (canonical),
			// with the breakpoint added when it is last.
			if i == bp {
				b = append(b, native[:len(native)-1]...)
				return append(b, `,"cache_control":{"type":"ephemeral"}}`...)
			}
			return append(b, native...)
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, t.Name)
		b = append(b, `,"description":`...)
		b = appendJSONString(b, t.Description)
		b = append(b, `,"input_schema":`...)
		b = append(b, schemaBytes(t)...)
		if i == bp {
			b = append(b, `,"cache_control":{"type":"ephemeral"}`...)
		}
		return append(b, '}')
	})
}

// renderArray renders tools as a JSON array, each element appended by
// elem; perTool is the bytes an element takes beside its schema, for the
// buffer's size.
func renderArray(tools []Tool, perTool int, elem func(b []byte, i int, t *Tool) []byte) []byte {
	b := make([]byte, 0, renderSize(tools, perTool))
	b = append(b, '[')
	for i := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i, &tools[i])
	}
	return append(b, ']')
}

// RenderOpenAI renders tools as an OpenAI Responses API "tools" array:
//
//	[{"type":"function","name":...,"description":...,"parameters":{...},"strict":false}, ...]
//
// with the same byte-identity guarantees as RenderAnthropic. Strict
// mode is off because registry schemas are not written for it (strict
// requires every property to be required and additionalProperties false).
// A tool with a native OpenAI form (Tool.Native, seed §8) is emitted as that
// built-in tool object instead, e.g. {"type":"web_search"}.
func RenderOpenAI(tools []Tool) []byte {
	return renderArray(tools, 80, func(b []byte, _ int, t *Tool) []byte {
		if native := t.Native.OpenAI; len(native) > 0 {
			return append(b, native...)
		}
		b = append(b, `{"type":"function","name":`...)
		b = appendJSONString(b, t.Name)
		b = append(b, `,"description":`...)
		b = appendJSONString(b, t.Description)
		b = append(b, `,"parameters":`...)
		b = append(b, schemaBytes(t)...)
		return append(b, `,"strict":false}`...)
	})
}
