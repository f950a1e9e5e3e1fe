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
	Stream string    `json:"stream"`
	From   uint64    `json:"from"`
	To     uint64    `json:"to"`
	What   string    `json:"what"`
	At     time.Time `json:"accepted_at"`
}

type acceptedLosses []AcceptedLoss

func (a acceptedLosses) covers(d StoreDamage) bool {
	for _, l := range a {
		if l.Stream == d.Stream && l.From <= d.LostFrom && d.LostTo <= l.To {
			return true
		}
	}
	return false
}

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

// RecordErased records the sequences [from, to] of stream in dataDir's
// AcceptedLossFile before an erase purges them (#30), so that CheckStore
// does not report the purged sequences as lost. A range inside a recorded
// one is not recorded again.
func RecordErased(dataDir, stream string, from, to uint64, now time.Time) error {
	a, err := readAcceptedLoss(dataDir)
	if err != nil {
		return err
	}
	if a.covers(StoreDamage{Stream: stream, LostFrom: from, LostTo: to}) {
		return nil
	}
	a = append(a, AcceptedLoss{Stream: stream, From: from, To: to, What: "erased: one session's events purged; the audit stream records the erase", At: now.UTC()})
	data, _ := json.MarshalIndent(a, "", "  ")
	if err := writeFileAtomic(filepath.Join(dataDir, AcceptedLossFile), data); err != nil {
		return fmt.Errorf("record erased range: %w", err)
	}
	return nil
}

// AcceptStoreDamage makes the damaged, stopped store in dataDir loadable
// again, accepting the loss CheckStore reported in rep: it keeps a copy
// of each damaged file in aside (a new directory in dataDir it returns),
// cuts each damaged block at its first bad record (as nats-server does
// when it rebuilds a block), removes the index.db of each damaged stream
// (so that nats-server rebuilds the stream's state from the blocks instead
// of trusting an index that claims what the blocks lost), moves each
// damaged consumer aside (its owner creates it again: the engine's
// projection then folds every view again from the first event), and
// records the sequence runs then missing in AcceptedLossFile. It checks
// the store's blocks again and fails unless they are then clean. The
// store must not be in use.
func AcceptStoreDamage(ctx context.Context, dataDir string, rep StoreReport, now time.Time) (aside string, err error) {
	if len(rep.Damage) == 0 {
		return "", nil
	}
	aside = filepath.Join(dataDir, "damaged-"+now.UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(aside, 0o750); err != nil {
		return "", fmt.Errorf("accept store damage: %w", err)
	}
	reindex := map[string]string{} // stream dir -> stream name
	for _, d := range rep.Damage {
		if d.Consumer != "" {
			cdir := filepath.Dir(d.File)
			dst := filepath.Join(aside, d.Stream, "obs", d.Consumer)
			if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
				return aside, fmt.Errorf("accept store damage: %w", err)
			}
			if err := os.Rename(cdir, dst); err != nil && !errors.Is(err, os.ErrNotExist) {
				return aside, fmt.Errorf("accept store damage: move consumer %s aside: %w", d.Consumer, err)
			}
			continue
		}
		sdir := filepath.Dir(filepath.Dir(d.File))
		reindex[sdir] = d.Stream
		if d.Offset < 0 || d.Gap {
			continue
		}
		fi, err := os.Stat(d.File)
		if err != nil || d.Offset >= fi.Size() {
			continue
		}
		if err := copyFile(d.File, filepath.Join(aside, d.Stream, filepath.Base(d.File))); err != nil {
			return aside, fmt.Errorf("accept store damage: keep a copy of %s: %w", d.File, err)
		}
		if err := os.Truncate(d.File, d.Offset); err != nil {
			return aside, fmt.Errorf("accept store damage: cut %s at %d: %w", d.File, d.Offset, err)
		}
	}
	for sdir, stream := range reindex {
		idx := filepath.Join(sdir, "msgs", "index.db")
		if _, err := os.Stat(idx); err != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Join(aside, stream), 0o750); err != nil {
			return aside, fmt.Errorf("accept store damage: %w", err)
		}
		if err := os.Rename(idx, filepath.Join(aside, stream, "index.db")); err != nil {
			return aside, fmt.Errorf("accept store damage: move %s aside: %w", idx, err)
		}
	}
	// What is left are runs of sequences missing between intact blocks:
	// record them as accepted.
	again, err := CheckStore(ctx, dataDir, StoreCheckConfig{})
	if err != nil {
		return aside, err
	}
	accepted, err := readAcceptedLoss(dataDir)
	if err != nil {
		return aside, err
	}
	again.Damage = blockDamage(again.Damage)
	for _, d := range again.Damage {
		if !d.Gap {
			return aside, fmt.Errorf("accept store damage: still damaged after the repair: %w", again.Err())
		}
		accepted = append(accepted, AcceptedLoss{Stream: d.Stream, From: d.LostFrom, To: d.LostTo, What: d.String(), At: now.UTC()})
	}
	if len(again.Damage) > 0 {
		data, _ := json.MarshalIndent(accepted, "", "  ")
		if err := writeFileAtomic(filepath.Join(dataDir, AcceptedLossFile), data); err != nil {
			return aside, fmt.Errorf("accept store damage: %w", err)
		}
	}
	final, err := CheckStore(ctx, dataDir, StoreCheckConfig{})
	if err != nil {
		return aside, err
	}
	final.Damage = blockDamage(final.Damage)
	if err := final.Err(); err != nil {
		return aside, fmt.Errorf("accept store damage: still damaged after the repair: %w", err)
	}
	return aside, nil
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
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
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
