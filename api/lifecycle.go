package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/toolintent/engine/service"
)

// DefaultEraseChannel is the channel allowed to erase sessions when
// Config.EraseChannel is empty (#30).
const DefaultEraseChannel = "ops"

// erase is DELETE ?erase=true (#30): only the erase channel may purge a
// session's events; any other channel is refused (403) before anything
// is written.
func (a *API) erase(ctx context.Context, r *DeleteRequest, o service.Origin) (DeleteResponse, error) {
	if o.Channel != a.cfg.EraseChannel {
		return DeleteResponse{}, &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: fmt.Sprintf("channel %q may not erase sessions: only the erase channel %q may (engine serve --erase-channel); delete without erase=true instead", o.Channel, a.cfg.EraseChannel)}
	}
	res, err := a.eng.Erase(ctx, r.Session, o, r.Reason)
	if err != nil {
		return DeleteResponse{}, err
	}
	return DeleteResponse{Session: r.Session, Seq: res.DeleteSeq, Erased: true,
		FirstSeq: res.FirstSeq, LastSeq: res.LastSeq, Purged: res.Purged, AuditSeq: res.AuditSeq}, nil
}
