package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
)

// AppendOption sets an optional field of one Append call:
// client.ExpectSeq(7) instead of a *uint64 in the request.
type AppendOption func(*AppendRequest)

// ExpectSeq makes the append conditional: the session must be at seq (0:
// no events yet), else ErrConflict.
func ExpectSeq(seq uint64) AppendOption {
	return func(r *AppendRequest) { r.ExpectedSeq = &seq }
}

// IdempotencyKey gives the append an idempotency key (the request's
// EventID): any string of 1 to 255 bytes, case-sensitive. A retry with the
// same key and commands returns the first call's reply (Duplicate) and
// writes nothing; IdempotencyEventIDs says the ids the events get.
func IdempotencyKey(key string) AppendOption {
	return func(r *AppendRequest) { r.EventID = key }
}

// NewIdempotencyKey returns a fresh random key (a version 4 UUID) for
// IdempotencyKey: generate it once per logical write, before the first
// try, and send it on every retry.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// localUsersFile is the file in `engine serve`'s data directory that holds
// the users its embedded NATS server generated (jetstream.CredentialsFile).
const localUsersFile = "nats-users.json"

// ConnectLocal connects to the embedded NATS server of a local `engine
// serve` (at DefaultNATSURL, or url) as the engine user it generated in
// dataDir ("" is ./engine-data, serve's default --data): the server has no
// anonymous user, so nats.Connect(DefaultNATSURL) alone is refused
// ("Authorization Violation"). opts are passed to nats.Connect.
func ConnectLocal(dataDir, url string, opts ...nats.Option) (*nats.Conn, error) {
	if dataDir == "" {
		dataDir = "./engine-data"
	}
	if url == "" {
		url = DefaultNATSURL
	}
	path := filepath.Join(dataDir, localUsersFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the users of the local engine: %w (give the data directory `engine serve --data` uses)", err)
	}
	var users struct {
		Engine struct {
			User     string `json:"user"`
			Password string `json:"password"`
		} `json:"engine"`
	}
	if err := json.Unmarshal(data, &users); err != nil || users.Engine.User == "" {
		return nil, fmt.Errorf("%s has no engine user (%v): is it the data directory of `engine serve`?", path, err)
	}
	opts = append([]nats.Option{nats.Name("engine-client"), nats.UserInfo(users.Engine.User, users.Engine.Password)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to the local engine's NATS at %s as %q: %w", url, users.Engine.User, err)
	}
	return nc, nil
}

// NewLocal returns a NATS client of a local `engine serve` (ConnectLocal)
// and the connection, for the caller to close when done.
func NewLocal(ctx context.Context, dataDir string, opts ...Option) (*Client, *nats.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	nc, err := ConnectLocal(dataDir, "")
	if err != nil {
		return nil, nil, err
	}
	return NewNATS(nc, opts...), nc, nil
}
