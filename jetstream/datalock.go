package jetstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the file, in a data directory, that the process owning the
// directory holds an exclusive OS lock on. It says who
// holds it: pid, command and start time.
const LockFile = "engine.lock"

// ErrDataDirInUse is matched (errors.Is) by the error of LockDataDir when
// another process holds the data directory.
var ErrDataDirInUse = errors.New("data directory in use")

// DataDirInUseError names the process that holds a data directory.
type DataDirInUseError struct {
	Dir     string
	PID     int
	Command string
	Since   time.Time
}

func (e *DataDirInUseError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = fmt.Sprintf("pid %d (%s, since %s)", e.PID, e.Command, e.Since.Format(time.RFC3339))
	}
	return fmt.Sprintf("data dir %s is in use by %s; stop it or pass --data", e.Dir, who)
}

// Unwrap makes errors.Is(err, ErrDataDirInUse) true.
func (e *DataDirInUseError) Unwrap() error { return ErrDataDirInUse }

// DataLock is an exclusive lock on a data directory, held until Release
// (or the process's end: the kernel drops a dead process's flock).
type DataLock struct {
	f *os.File
}

// LockDataDir takes an exclusive, non-blocking flock on <dir>/engine.lock
// (creating dir) and records the holder in it; command describes this
// process (e.g. "engine serve"). When another process holds it the error
// is a *DataDirInUseError naming that process.
func LockDataDir(dir, command string) (*DataLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, holderOf(dir, path)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if command == "" {
		command = defaultCommand()
	}
	content := fmt.Sprintf("pid=%d\ncommand=%s\nsince=%s\n", os.Getpid(), command, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(content), 0)
	}
	return &DataLock{f: f}, nil
}

// holderOf reads who holds the lock file.
func holderOf(dir, path string) error {
	e := &DataDirInUseError{Dir: dir}
	data, err := os.ReadFile(path)
	if err != nil {
		return e
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "pid":
			e.PID, _ = strconv.Atoi(v)
		case "command":
			e.Command = v
		case "since":
			e.Since, _ = time.Parse(time.RFC3339, v)
		}
	}
	return e
}

func defaultCommand() string {
	cmd := filepath.Base(os.Args[0])
	if len(os.Args) > 1 {
		cmd += " " + os.Args[1]
	}
	return cmd
}

// Release drops the lock. Safe to call twice.
func (l *DataLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// HasStore reports whether dir holds a JetStream store with the stream
// name (a data directory an engine has served).
func HasStore(dir, stream string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", stream))
	return len(matches) > 0
}
