package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// AcceptedLossFile, in a data directory, lists the runs of sequences an
// operator accepted as lost (AcceptStoreDamage): CheckStore no longer
// reports those gaps.
const AcceptedLossFile = "accepted-loss.json"

// AcceptedLoss is one run of sequences accepted as lost.
type AcceptedLoss struct {
	Stream string `json:"stream"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	// Count is how many of the run's sequences may be missing (0: all):
	// an accepted run inside a purged range counts only the messages of
	// other sessions it lost.
	Count uint64    `json:"count,omitempty"`
	What  string    `json:"what"`
	At    time.Time `json:"accepted_at"`
}

type acceptedLosses []AcceptedLoss

func readAcceptedLoss(dataDir string) (acceptedLosses, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, AcceptedLossFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read accepted losses: %w", err)
	}
	var a acceptedLosses
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("read accepted losses %s: %w (fix or remove the file)", filepath.Join(dataDir, AcceptedLossFile), err)
	}
	return a, nil
}

// AcceptReport is what AcceptStoreDamage did.
type AcceptReport struct {
	// Aside is the directory in the data directory that keeps a copy of
	// every file the repair changed or moved ("" when nothing was).
	Aside string
	// Dropped lists the damaged spans the repair removed from their
	// blocks: the sequences they held (where the records around them
	// tell) and the subjects still readable in them. Every other record
	// of those blocks is kept.
	Dropped []StoreDamage
	// Accepted lists the runs of sequences recorded as lost in
	// AcceptedLossFile: the dropped spans' and the gaps no purge explains.
	Accepted []AcceptedLoss
}

// DroppedFile, in an AcceptReport's Aside directory, lists its Dropped
// spans as JSON.
const DroppedFile = "dropped.json"

// AcceptStoreDamage makes the damaged, stopped store in dataDir loadable
// again, accepting the loss CheckStore reported in rep. It never cuts a
// block at a gap: a run of missing sequences between intact records
// changes no file and is only recorded as accepted. A block with damaged
// bytes is rewritten without the damaged spans, keeping every intact
// record before and after them (the original is copied to the Aside
// directory first), and DroppedFile there names what each dropped span
// held. It removes the index.db of each damaged stream (nats-server then
// rebuilds the stream's state from the blocks instead of trusting an
// index that claims what the blocks lost), moves each damaged consumer
// aside (its owner creates it again: the engine's projection then folds
// every view again from the first event), and records the runs of
// sequences then missing in AcceptedLossFile. It checks the store's
// blocks again and fails unless they are then clean. The store must not
// be in use.
func AcceptStoreDamage(ctx context.Context, dataDir string, rep StoreReport, now time.Time) (AcceptReport, error) {
	var out AcceptReport
	if len(rep.Damage) == 0 {
		return out, nil
	}
	out.Aside = filepath.Join(dataDir, "damaged-"+now.UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(out.Aside, 0o750); err != nil {
		return out, fmt.Errorf("accept store damage: %w", err)
	}
	reindex := map[string]string{}      // stream dir -> stream name
	spans := map[string][]StoreDamage{} // block file -> damaged spans
	var files []string                  // the keys of spans, in report order
	for _, d := range rep.Damage {
		if d.Consumer != "" {
			cdir := filepath.Dir(d.File)
			dst := filepath.Join(out.Aside, d.Stream, "obs", d.Consumer)
			if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
				return out, fmt.Errorf("accept store damage: %w", err)
			}
			if err := os.Rename(cdir, dst); err != nil && !errors.Is(err, os.ErrNotExist) {
				return out, fmt.Errorf("accept store damage: move consumer %s aside: %w", d.Consumer, err)
			}
			continue
		}
		sdir := filepath.Dir(filepath.Dir(d.File))
		reindex[sdir] = d.Stream
		if d.Offset < 0 || d.Gap {
			continue
		}
		if _, ok := spans[d.File]; !ok {
			files = append(files, d.File)
		}
		spans[d.File] = append(spans[d.File], d)
	}
	for _, file := range files {
		stream := spans[file][0].Stream
		if err := copyFile(file, filepath.Join(out.Aside, stream, filepath.Base(file))); err != nil {
			return out, fmt.Errorf("accept store damage: keep a copy of %s: %w", file, err)
		}
		if err := dropSpans(file, spans[file]); err != nil {
			return out, fmt.Errorf("accept store damage: %w", err)
		}
		out.Dropped = append(out.Dropped, spans[file]...)
	}
	if len(out.Dropped) > 0 {
		data, _ := json.MarshalIndent(out.Dropped, "", "  ")
		if err := writeFileAtomic(filepath.Join(out.Aside, DroppedFile), data); err != nil {
			return out, fmt.Errorf("accept store damage: %w", err)
		}
	}
	for sdir, stream := range reindex {
		idx := filepath.Join(sdir, "msgs", "index.db")
		if _, err := os.Stat(idx); err != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Join(out.Aside, stream), 0o750); err != nil {
			return out, fmt.Errorf("accept store damage: %w", err)
		}
		if err := os.Rename(idx, filepath.Join(out.Aside, stream, "index.db")); err != nil {
			return out, fmt.Errorf("accept store damage: move %s aside: %w", idx, err)
		}
	}
	// What is left are runs of sequences missing between intact records:
	// record them as accepted.
	again, err := CheckStore(ctx, dataDir, StoreCheckConfig{})
	if err != nil {
		return out, err
	}
	accepted, err := readAcceptedLoss(dataDir)
	if err != nil {
		return out, err
	}
	again.Damage = blockDamage(again.Damage)
	for _, d := range again.Damage {
		if !d.Gap {
			return out, fmt.Errorf("accept store damage: still damaged after the repair: %w", again.Err())
		}
		l := AcceptedLoss{Stream: d.Stream, From: d.LostFrom, To: d.LostTo, Count: d.Count, What: d.String(), At: now.UTC()}
		accepted = append(accepted, l)
		out.Accepted = append(out.Accepted, l)
	}
	if len(again.Damage) > 0 {
		data, _ := json.MarshalIndent(accepted, "", "  ")
		if err := writeFileAtomic(filepath.Join(dataDir, AcceptedLossFile), data); err != nil {
			return out, fmt.Errorf("accept store damage: %w", err)
		}
	}
	final, err := CheckStore(ctx, dataDir, StoreCheckConfig{})
	if err != nil {
		return out, err
	}
	final.Damage = blockDamage(final.Damage)
	if err := final.Err(); err != nil {
		return out, fmt.Errorf("accept store damage: still damaged after the repair: %w", err)
	}
	return out, nil
}

// dropSpans rewrites the block file without the byte spans [Offset, End)
// of ds (in file order), keeping every byte around them: each record
// carries its own checksum, keyed by the block and not by its offset, so
// the records after a removed span stay intact where they land.
func dropSpans(file string, ds []StoreDamage) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := file + ".repair"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	var at int64
	keep := func(to int64) error {
		if to <= at {
			return nil
		}
		_, err := io.Copy(out, io.NewSectionReader(in, at, to-at))
		return err
	}
	for _, d := range ds {
		end := d.End
		if end <= d.Offset || end > fi.Size() {
			end = fi.Size()
		}
		if err := keep(d.Offset); err != nil {
			out.Close()
			return fmt.Errorf("rewrite %s: %w", file, err)
		}
		at = max(at, end)
	}
	if err := keep(fi.Size()); err != nil {
		out.Close()
		return fmt.Errorf("rewrite %s: %w", file, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("rewrite %s: %w", file, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("rewrite %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("rewrite %s: %w", file, err)
	}
	return nil
}

// blockDamage keeps the damage to message blocks: the consumers rep
// named are gone, and others' state is not what the repair is judged by.
func blockDamage(ds []StoreDamage) []StoreDamage {
	var out []StoreDamage
	for _, d := range ds {
		if d.Consumer == "" {
			out = append(out, d)
		}
	}
	return out
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
