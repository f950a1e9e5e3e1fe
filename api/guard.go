package api

import (
	"fmt"
	"strings"

	"github.com/toolintent/engine/internal/clip"
)

// replyAllowed reports whether the engine may publish a reply to subject.
// A reply goes only to an inbox: the first token is
// _INBOX (nats.go, natscli) or starts with _INBOX_ (the private inbox
// prefixes of deploy/nats-server.conf, set with nats.CustomInboxPrefix),
// or is _R_, the server's mapping of a reply subject for a request that
// came through a service import from another account.
// Anything else, in particular the engine's own subjects (the event log,
// the API), the JetStream and KV API ($JS., $KV.) and the system subjects,
// is refused: otherwise a caller could make the engine write its JSON
// reply into the log or a KV bucket by naming it as the reply subject.
func replyAllowed(subject string) error {
	first, rest, ok := strings.Cut(subject, ".")
	if !ok || rest == "" {
		return fmt.Errorf("reply subject %q is not an inbox: use a reply subject under _INBOX. or _INBOX_<user>. (nats.go's default, or nats.CustomInboxPrefix)", clip.String(subject, clip.Max))
	}
	if first != "_INBOX" && first != "_R_" && !strings.HasPrefix(first, "_INBOX_") {
		return fmt.Errorf("reply subject %q is not an inbox: the engine replies only to subjects under _INBOX.> or _INBOX_<user>.>", clip.String(subject, clip.Max))
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("reply subject %q is not a valid inbox subject", clip.String(subject, clip.Max))
		}
	}
	return nil
}
