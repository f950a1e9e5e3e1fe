package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/service"
)

// StartMicro registers the NATS micro service "tool-engine" on nc and
// returns it once the server knows every endpoint; stop it with Stop (or
// by closing nc). Each operation is one
// endpoint on <SubjectPrefix>.*.<op.Subject>, in the queue group
// "tool-engine" so that several engines share the load; `nats micro ls`,
// `info` and `stats` see it.
//
// The channel of a request is the subject token after the prefix:
// tools.api.web.events.append writes events with channel "web". Give each
// channel its own NATS user allowed to publish only to
// tools.api.<channel>.> (plus its _INBOX for replies), and the channel is
// verified by the server. The actor comes from the Engine-Actor header, or
// the body's "actor" field. The session id is in the JSON body.
//
// Request bodies are JSON (or msgpack with Content-Type:
// application/msgpack); replies are JSON, or msgpack when the request has
// the header Accept: application/msgpack. An error reply has the micro
// headers Nats-Service-Error-Code (the HTTP status, e.g. "409") and
// Nats-Service-Error (the message), the header Engine-Error-Code (the code)
// and the error envelope as body, so that micro stats count it.
//
// ctx bounds every request handled (cancel it to fail requests in
// flight); each request also gets Config.RequestTimeout. An endpoint
// handles its requests one at a time, as micro does; run more engines in
// the queue group to handle more at once.
func (a *API) StartMicro(ctx context.Context, nc *nats.Conn) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "Session tool-configuration engine: intent commands, resolution, turns, checkpoints, audit replay.",
		QueueGroup:  ServiceName,
		Metadata:    map[string]string{"subject_prefix": a.cfg.SubjectPrefix, "channel_token": a.cfg.SubjectPrefix + ".<channel>"},
	})
	if err != nil {
		return nil, fmt.Errorf("add micro service %s: %w", ServiceName, err)
	}
	group := svc.AddGroup(a.cfg.SubjectPrefix + ".*")
	for _, op := range operations {
		meta := map[string]string{
			"http":    strings.Join(op.Methods, "|") + " " + op.Path,
			"write":   strconv.FormatBool(op.Write),
			"summary": op.Summary,
		}
		if err := group.AddEndpoint(op.Name, a.microOp(ctx, op),
			micro.WithEndpointSubject(op.Subject), micro.WithEndpointMetadata(meta)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("add micro endpoint %s: %w", op.Name, err)
		}
	}
	// Make sure the server has every subscription before callers send
	// requests (no "no responders" right after start).
	fctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("start micro service %s: flush subscriptions: %w", ServiceName, err)
	}
	return svc, nil
}

// Subject returns the NATS subject of an operation for a channel under a
// prefix ("" is the default prefix), e.g. tools.api.web.session.resolve.
func Subject(prefix, channel, op string) (string, error) {
	o, ok := opsByName[op]
	if !ok {
		return "", badRequest("operation %q is unknown: see Operations()", op)
	}
	if prefix == "" {
		prefix = Config{}.withDefaults().SubjectPrefix
	}
	if err := validToken("channel", channel); err != nil {
		return "", err
	}
	return prefix + "." + channel + "." + o.Subject, nil
}

func (a *API) microOp(ctx context.Context, op *operation) micro.Handler {
	prefix := a.cfg.SubjectPrefix + "."
	suffix := "." + op.Subject
	return micro.HandlerFunc(func(r micro.Request) {
		mp := wantsMsgpack(r.Headers().Get("Accept"))
		resp, err := a.serveMicro(ctx, op, r, prefix, suffix)
		if err != nil {
			e := errorOf(err)
			a.logError(op, e, err)
			a.respondError(r, mp, e)
			return
		}
		body, err := encodeReply(resp, mp)
		if err != nil {
			a.respondError(r, mp, errorOf(err))
			return
		}
		_ = r.Respond(body, micro.WithHeaders(micro.Headers{"Content-Type": []string{contentType(mp)}}))
	})
}

func (a *API) serveMicro(ctx context.Context, op *operation, r micro.Request, prefix, suffix string) (any, error) {
	subj := r.Subject()
	channel := strings.TrimSuffix(strings.TrimPrefix(subj, prefix), suffix)
	if err := validToken("channel (subject token)", channel); err != nil {
		return nil, err
	}
	data := r.Data()
	if int64(len(data)) > a.cfg.MaxBodyBytes {
		return nil, tooLarge(a.cfg.MaxBodyBytes)
	}
	req := op.newReq()
	if err := decodeBody(data, r.Headers().Get("Content-Type"), req); err != nil {
		return nil, err
	}
	o := service.Origin{Actor: r.Headers().Get(HeaderActor)}
	if op.Write {
		o.Channel = channel
	}
	return a.run(ctx, op, req, o)
}

func (a *API) respondError(r micro.Request, mp bool, e *APIError) {
	body, err := encodeReply(errorEnvelope{Error: e}, mp)
	if err != nil {
		body = nil
	}
	msg := oneLine(e.Message)
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	_ = r.Error(strconv.Itoa(e.Status), msg, body, micro.WithHeaders(micro.Headers{
		"Content-Type":  []string{contentType(mp)},
		HeaderErrorCode: []string{e.Code},
	}))
}

func byteSize(n int64) string {
	s := strconv.FormatInt(n, 10) + " bytes"
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		s += " (" + strconv.FormatInt(n>>20, 10) + " MiB)"
	case n >= 1<<10 && n%(1<<10) == 0:
		s += " (" + strconv.FormatInt(n>>10, 10) + " KiB)"
	}
	return s
}
