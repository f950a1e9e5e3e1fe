package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/wire"
)

// DecodeCommand decodes one command object into its events.Payload, in
// value form, through the events command table (events.DecodeCommand). A
// command in JSON is one object with a "type" (an events.Type) and the
// fields of that payload, named as in the msgpack wire format:
//
//	{"type":"ToolsToggled","enabled":true}            enabled: true|false|null (null: follow profile)
//	{"type":"WebSearchSet","enabled":null}            enabled: true|false|null (null: unset)
//	{"type":"PresetChosen","preset":"research"}       preset: string, "" or null unsets
//	{"type":"ToolDisabled","name":"bash"}             name: string
//	{"type":"ToolEnabled","name":"bash"}              name: string
//	{"type":"ToolsPicked","names":["read_file"]}      names: [string] or null (null unsets)
//	{"type":"DeferredLoaded","names":["send_message"],"turn":3}   turn optional
//	{"type":"TurnStarted","turn":4}                   turn optional (0: next); the engine
//	                                                  records intent, profile, override,
//	                                                  registry_version, contract_hash
//	{"type":"TurnEnded","turn":4}                     turn optional (0: current)
//	{"type":"CheckpointRecorded","loaded_deferred_tools":[...],"contract_hash":"...",
//	 "registry_version":"...","turn":4,"contract":[{"name":"...","hash":"..."}]}
//
// Decoding is strict: an unknown or missing type, an unknown, duplicated or
// missing field and a value of the wrong JSON type are errors that name the
// type or field (and list what is accepted). Whether the command makes sense
// for the session (known preset, known tool) is decided by the engine
// when it is appended.
//
// Errors match wire.ErrBadRequest.
func DecodeCommand(data []byte) (events.Payload, error) {
	p, err := events.DecodeCommand(data)
	return p, asBadRequest(err)
}

// EncodeCommand encodes a payload as a command object: "type" first, then
// every field of the payload in wire order (nil lists and unset switches
// as null), so that DecodeCommand gives the same payload back.
func EncodeCommand(p events.Payload) ([]byte, error) {
	b, err := events.EncodeCommand(p)
	return b, asBadRequest(err)
}

// asBadRequest makes an events.ErrInvalidCommand error match
// wire.ErrBadRequest, with the same text.
func asBadRequest(err error) error {
	if errors.Is(err, events.ErrInvalidCommand) {
		return wire.BadRequest("%s", err.Error())
	}
	return err
}

// Command is one command in a request or a history entry: an
// events.Payload that marshals as a command object (EncodeCommand,
// DecodeCommand).
type Command struct {
	events.Payload
}

// MarshalJSON implements json.Marshaler.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Payload == nil {
		return []byte("null"), nil
	}
	return EncodeCommand(c.Payload)
}

// UnmarshalJSON implements json.Unmarshaler with DecodeCommand.
func (c *Command) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		c.Payload = nil
		return nil
	}
	p, err := DecodeCommand(b)
	if err != nil {
		return err
	}
	c.Payload = p
	return nil
}

// Commands is a list of commands. It decodes strictly, naming the index of
// a bad command ("commands[2]: ...").
type Commands []events.Payload

// MarshalJSON implements json.Marshaler.
func (cs Commands) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, p := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		one, err := EncodeCommand(p)
		if err != nil {
			return nil, fmt.Errorf("commands[%d]: %w", i, err)
		}
		b.Write(one)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (cs *Commands) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*cs = nil
		return nil
	}
	var items []json.RawMessage
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '[' || json.Unmarshal(b, &items) != nil {
		return wire.BadRequest(`field "commands" must be an array of command objects, got %s`, clip.Raw(b))
	}
	if len(items) > wire.MaxCommands {
		return wire.BadRequest("field \"commands\" has %d commands, at most %d are accepted in one request", len(items), wire.MaxCommands)
	}
	out := make(Commands, 0, len(items))
	for i, it := range items {
		p, err := DecodeCommand(it)
		if err != nil {
			return fmt.Errorf("commands[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	*cs = out
	return nil
}
