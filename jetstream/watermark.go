package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WatermarkFile is the file, in a data directory, that records how far
// the event stream reached while an engine served it. It
// lives outside the JetStream store on purpose: a store that was lost,
// moved or truncated cannot take its own record with it.
const WatermarkFile = "engine-watermark.json"

// ErrLogShort is matched (errors.Is) when the event stream holds less
// than the data directory's watermark says it held: acknowledged events
// are missing (a store moved, truncated, emptied or restored from an
// older copy).
var ErrLogShort = errors.New("the log holds less than the engine acknowledged")

// ErrNestedStore is matched (errors.Is) by StartEmbedded when the data
// directory holds a store in <data>/jetstream/jetstream, where an
// in-process JetStream restart of engines moved it.
var ErrNestedStore = errors.New("JetStream store in a nested jetstream directory")

// StreamMark is what one stream held: its last sequence and its message
// count (the event stream denies delete and purge, so a lower count is
// loss).
type StreamMark struct {
	LastSeq  uint64    `json:"last_seq"`
	Messages uint64    `json:"messages"`
	Updated  time.Time `json:"updated"`
}

// Watermark is the content of WatermarkFile: per stream name, the most
// it was seen to hold. It only ever grows, except when an operator
// accepts a loss (engine rebuild).
type Watermark struct {
	Streams map[string]StreamMark `json:"streams"`
}

// WatermarkPath is the watermark file of a data directory.
func WatermarkPath(dir string) string { return filepath.Join(dir, WatermarkFile) }

// ReadWatermark reads dir's watermark; a missing file is an empty
// watermark (a new data directory, or one served).
func ReadWatermark(dir string) (Watermark, error) {
	w := Watermark{Streams: map[string]StreamMark{}}
	data, err := os.ReadFile(WatermarkPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return w, nil
	}
	if err != nil {
		return w, fmt.Errorf("read watermark: %w", err)
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, fmt.Errorf("read watermark %s: %w (move the file aside to start without the record of what was acknowledged)", WatermarkPath(dir), err)
	}
	if w.Streams == nil {
		w.Streams = map[string]StreamMark{}
	}
	return w, nil
}

// WriteWatermark replaces dir's watermark atomically: a temporary file,
// fsynced, renamed over the old one, and the directory fsynced, so a
// crash leaves the old record or the new one, never a torn one.
func WriteWatermark(dir string, w Watermark) error {
	data, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return err
	}
	path := WatermarkPath(dir)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write watermark: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write watermark %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// StreamState is what the event stream holds now.
type StreamState struct {
	FirstSeq, LastSeq, Messages, Deleted uint64
}

// StreamState asks the server for the event stream's state.
func (l *Log) StreamState(ctx context.Context) (StreamState, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	info, err := l.streamInfo(ctx)
	if err != nil {
		return StreamState{}, fmt.Errorf("stream info %s: %w", l.name, err)
	}
	s := info.State
	return StreamState{FirstSeq: s.FirstSeq, LastSeq: s.LastSeq, Messages: s.Msgs, Deleted: uint64(s.NumDeleted)}, nil
}

// Short compares what a stream holds with its mark: an error matching
// ErrLogShort naming the gap when the stream ends before the mark or
// holds fewer messages, nil otherwise. dir and stream name the data
// directory and stream in the message.
func (m StreamMark) Short(dir, stream string, s StreamState) error {
	switch {
	case s.LastSeq < m.LastSeq:
		return fmt.Errorf("%w: stream %s in %s ends at sequence %d (%d messages) but the engine acknowledged up to %d (%d messages, recorded %s in %s): %d acknowledged events are missing; "+
			"restore the data directory from a backup (or move a misplaced store back), or accept the loss with `engine rebuild --data %s`",
			ErrLogShort, stream, dir, s.LastSeq, s.Messages, m.LastSeq, m.Messages, m.Updated.UTC().Format(time.RFC3339), WatermarkPath(dir), m.LastSeq-s.LastSeq, dir)
	case s.Messages < m.Messages:
		return fmt.Errorf("%w: stream %s in %s holds %d messages up to sequence %d (%d deleted) but held %d (recorded %s in %s): %d acknowledged events are missing from the middle of the log; "+
			"restore the data directory from a backup, or accept the loss with `engine rebuild --data %s`",
			ErrLogShort, stream, dir, s.Messages, s.LastSeq, s.Deleted, m.Messages, m.Updated.UTC().Format(time.RFC3339), WatermarkPath(dir), m.Messages-s.Messages, dir)
	}
	return nil
}

// Raise returns the mark grown to cover s (never lowered), and whether it
// changed.
func (m StreamMark) Raise(s StreamState, now time.Time) (StreamMark, bool) {
	if s.LastSeq <= m.LastSeq && s.Messages <= m.Messages {
		return m, false
	}
	return StreamMark{LastSeq: max(m.LastSeq, s.LastSeq), Messages: max(m.Messages, s.Messages), Updated: now}, true
}

// nestedStore reports a store left in <dir>/jetstream/jetstream by the
// in-process restart of engines.
func nestedStore(dir string) error {
	nested := filepath.Join(dir, "jetstream", "jetstream")
	entries, err := os.ReadDir(nested)
	if err != nil || len(entries) == 0 {
		return nil
	}
	var accounts []string
	for _, e := range entries {
		if e.IsDir() {
			accounts = append(accounts, e.Name())
		}
	}
	if len(accounts) == 0 {
		return nil
	}
	acc := accounts[0]
	from, to := filepath.Join(nested, acc), filepath.Join(dir, "jetstream", acc)
	return fmt.Errorf("%w: data dir %s: %s holds a JetStream store (accounts %v), moved there by an in-process JetStream restart of an older engine, "+
		"while the engine serves %s: with no engine running on %s, move each account back, e.g. `mv '%s' '%s'` "+
		"(if %s exists it was created empty after the move: move it aside first, and keep it if anything was appended to it), then remove the empty %s and start again",
		ErrNestedStore, dir, nested, accounts, filepath.Join(dir, "jetstream"), dir, from, to, to, nested)
}
