package jetstream

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
)

// CredentialsFile is the file, in the embedded server's data directory,
// that holds its users (mode 0600).
const CredentialsFile = "nats-users.json"

// UserPass is one user of the embedded server.
type UserPass struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// Credentials are the users of an embedded server started without a
// config file: nobody connects anonymously.
//   - Engine runs the engine (and the CLI's commands that open the log):
//     everything except deleting, purging or updating streams and
//     deleting messages.
//   - Admin may do everything, including `engine stream repair`.
type Credentials struct {
	Engine UserPass `json:"engine"`
	Admin  UserPass `json:"admin"`
}

// engineDeny is what the engine user may not publish: the stream
// operations that lose or rewrite the log.
var engineDeny = []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.UPDATE.>"}

// CredentialsPath is the credentials file of a data directory.
func CredentialsPath(dataDir string) string { return filepath.Join(dataDir, CredentialsFile) }

// ReadCredentials reads a data directory's credentials file; the error
// matches fs.ErrNotExist when there is none.
func ReadCredentials(dataDir string) (Credentials, error) {
	var c Credentials
	data, err := os.ReadFile(CredentialsPath(dataDir))
	if err != nil {
		return c, fmt.Errorf("read NATS users: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Engine.User == "" || c.Engine.Password == "" || c.Admin.User == "" || c.Admin.Password == "" {
		return c, fmt.Errorf("NATS users file %s is damaged (%v): delete it and restart the engine to create new users", CredentialsPath(dataDir), err)
	}
	return c, nil
}

// LoadOrCreateCredentials reads a data directory's credentials, creating
// them with random passwords (mode 0600) on first use; created says so.
func LoadOrCreateCredentials(dataDir string) (c Credentials, created bool, err error) {
	c, err = ReadCredentials(dataDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return c, false, err
	}
	c = NewCredentials()
	if err := SaveCredentials(dataDir, c); errors.Is(err, fs.ErrExist) { // created meanwhile by another process
		c, err = ReadCredentials(dataDir)
		return c, false, err
	} else if err != nil {
		return c, false, err
	}
	return c, true, nil
}

// NewCredentials returns an engine user and an admin with random
// passwords.
func NewCredentials() Credentials {
	return Credentials{Engine: UserPass{"engine", randomSecret()}, Admin: UserPass{"admin", randomSecret()}}
}

// SaveCredentials writes c to dataDir's users file (mode 0600); it fails
// matching fs.ErrExist when the file exists.
func SaveCredentials(dataDir string, c Credentials) error {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	data, _ := json.MarshalIndent(c, "", "  ")
	f, err := os.OpenFile(CredentialsPath(dataDir), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create NATS users file: %w", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write NATS users file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write NATS users file: %w", err)
	}
	return nil
}

func randomSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// users are the server users for c.
func (c Credentials) users() []*server.User {
	return []*server.User{
		{Username: c.Engine.User, Password: c.Engine.Password, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: engineDeny},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}},
		{Username: c.Admin.User, Password: c.Admin.Password},
	}
}
