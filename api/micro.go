package api

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/msgpackjson"
	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// StartMicro registers the NATS micro service "tool-engine" on nc and
// returns it once the server knows every endpoint; stop it with Stop (or
// by closing nc). Each operation is one
// endpoint on <SubjectPrefix>.*.<op.Subject>, in the queue group
// "tool-engine" so that several engines share the load; `nats micro ls`,
// `info` and `stats` see it.
//
// The channel of a request is the subject token after the prefix
// (tools.api.web.events.append writes as "web"; see the package doc for
// the NATS permissions that verify it); bodies and error replies are as
// package wire documents (Formats, Errors), micro's error headers set so
// that micro stats count errors.
//
// ctx bounds every request handled (cancel it to fail requests in
// flight); each request also gets Config.RequestTimeout. Requests run
// concurrently, at most Config.MaxInFlightPerChannel per channel and
// Config.MaxInFlight in all; beyond that the reply is CodeBusy (429).
// The engine replies only to inbox subjects (_INBOX. or _INBOX_<user>.):
// a request with any other reply subject is dropped and logged.
func (a *API) StartMicro(ctx context.Context, nc *nats.Conn) (micro.Service, error) {
	late := make(map[string]*atomic.Uint64, len(operations))
	for _, op := range operations {
		late[op.Name] = new(atomic.Uint64)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "Session tool-configuration engine: intent commands, resolution, turns, checkpoints, audit replay.",
		QueueGroup:  ServiceName,
		Metadata:    map[string]string{"subject_prefix": a.cfg.SubjectPrefix, "channel_token": a.cfg.SubjectPrefix + ".<channel>"},
		StatsHandler: func(e *micro.Endpoint) any {
			if n, ok := late[e.Name]; ok {
				return map[string]uint64{"late_errors": n.Load()}
			}
			return nil
		},
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
			// JSON Schemas of the request and the reply, shown by
			// `nats micro info` (docs/api.md lists the same).
			"request_schema":  openapi.JSON(RequestSchema(op.Name)),
			"response_schema": openapi.JSON(schemaOf(op.RespType)),
		}
		if err := group.AddEndpoint(op.Name, a.microOp(ctx, nc, op, late[op.Name]),
			micro.WithEndpointSubject(op.Subject), micro.WithEndpointMetadata(meta)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("add micro endpoint %s: %w", op.Name, err)
		}
	}
	if err := a.addLiveEndpoints(ctx, nc, group); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// A request to an operation the engine does not have gets the error
	// envelope (not_found), not "no responders". The endpoint
	// has a queue group of its own, so it also sees the requests of the
	// known operations and leaves them to their endpoints.
	if err := svc.AddEndpoint(unknownOpEndpoint, a.unknownOp(), micro.WithEndpointSubject(a.cfg.SubjectPrefix+".*.>"),
		micro.WithEndpointQueueGroup(ServiceName+"-unknown"),
		micro.WithEndpointMetadata(map[string]string{"summary": "Answers requests to an unknown operation with a not_found error envelope."})); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("add micro endpoint %s: %w", unknownOpEndpoint, err)
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
	if err := service.ValidToken("channel", channel); err != nil {
		return "", err
	}
	return prefix + "." + channel + "." + o.Subject, nil
}

// microChannel is the channel of a request to op (the subject token after
// the prefix), or false when the request is dropped: the engine never
// publishes into its own namespaces, so a request whose
// reply subject is not an inbox gets no reply, since the only way to tell
// its sender is that reply.
func (a *API) microChannel(op *operation, r micro.Request) (string, bool) {
	if err := replyAllowed(r.Reply()); err != nil {
		a.cfg.Logger.Warn().Str("op", op.Name).Str("subject", r.Subject()).Str("reply", clip.String(r.Reply(), clip.Max)).Err(err).Msg("request refused: reply subject is not an inbox")
		return "", false
	}
	return strings.TrimSuffix(strings.TrimPrefix(r.Subject(), a.cfg.SubjectPrefix+"."), "."+op.Subject), true
}

func (a *API) microOp(ctx context.Context, nc *nats.Conn, op *operation, late *atomic.Uint64) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		channel, ok := a.microChannel(op, r)
		if !ok {
			return
		}
		start := time.Now()
		mp := wire.WantsMsgpack(r.Headers().Get("Accept"))
		fail := func(err error) {
			e := errorOf(err)
			a.logError(op, e, err)
			a.respondError(r, mp, e)
			a.observe(op, channel, err, start)
		}
		req, o, err := a.prepareMicro(op, r, channel)
		if err != nil {
			fail(err)
			return
		}
		if err := a.lim.Acquire(channel, channel); err != nil {
			fail(err)
			return
		}
		// micro calls an endpoint's handler for one request at a time:
		// run the operation on its own goroutine so that a slow request
		// (a min_seq wait) does not hold up the next; the limiter bounds
		// how many run. micro counts only the errors answered before
		// this point; late counts the others (stats data "late_errors").
		// The goroutine answers on the connection, not through r: micro
		// reads r's error state once the handler returns, and r's
		// Respond and Error write it (a data race under -race).
		reply := r.Reply()
		go func() {
			defer a.lim.Release(channel)
			resp, err := a.call(ctx, op, req, o)
			if err != nil {
				late.Add(1)
				e := errorOf(err)
				a.logError(op, e, err)
				_ = nc.PublishMsg(errorMsg(reply, mp, e))
				a.observe(op, channel, err, start)
				return
			}
			body, err := msgpackjson.EncodeReply(resp, mp)
			if err == nil && int64(len(body)) > nc.MaxPayload() {
				err = replyTooLarge(op, len(body), nc.MaxPayload())
			}
			if err != nil {
				late.Add(1)
				_ = nc.PublishMsg(errorMsg(reply, mp, errorOf(err)))
				a.observe(op, channel, err, start)
				return
			}
			_ = nc.PublishMsg(&nats.Msg{Subject: reply, Data: body, Header: nats.Header{"Content-Type": []string{contentType(mp)}}})
			a.observe(op, channel, nil, start)
		}()
	})
}

// replyTooLarge is the error of a NATS reply over the server's
// max_payload: the publish would fail and the caller would wait out its
// timeout. A turn view's rendering is the usual cause (a native mode
// defines every tool of a large registry).
func replyTooLarge(op *operation, n int, limit int64) error {
	fix := "raise the NATS server's max_payload (the embedded server's is 8 MiB) or call over HTTP"
	if op.ReqType.Implements(reflect.TypeFor[wire.Conditional]()) || reflect.PointerTo(op.ReqType).Implements(reflect.TypeFor[wire.Conditional]()) {
		fix = "send the rendering_hash of the rendering you hold as if_none_match, " + fix
	}
	return &APIError{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeTooLarge,
		Message: op.Name + " reply of " + strconv.Itoa(n) + " bytes exceeds the NATS server's max_payload " + byteSize(limit) + ": " + fix}
}

// prepareMicro decodes and checks a request (quick, bounded work).
func (a *API) prepareMicro(op *operation, r micro.Request, channel string) (any, service.Origin, error) {
	var o service.Origin
	if err := service.ValidToken("channel (subject token)", channel); err != nil {
		return nil, o, err
	}
	data := r.Data()
	if int64(len(data)) > a.bodyLimit(op) {
		return nil, o, tooLarge(op, a.bodyLimit(op))
	}
	req := op.NewRequest()
	if err := msgpackjson.DecodeBody(data, r.Headers().Get("Content-Type"), req); err != nil {
		return nil, o, err
	}
	if err := service.BindIdempotencyKey(req, r.Headers().Get(wire.HeaderIdempotencyKey)); err != nil {
		return nil, o, err
	}
	o.Actor = r.Headers().Get(wire.HeaderActor)
	// Every operation knows its caller's channel: writes record it, reads
	// resolve under its policy.
	o.Channel = channel
	if err := service.CheckRequest(req, &o); err != nil {
		return nil, o, err
	}
	return req, o, nil
}

func (a *API) respondError(r micro.Request, mp bool, e *APIError) {
	body, h := errorReply(mp, e)
	_ = r.Error(strconv.Itoa(e.Status), errorDescription(e), body, micro.WithHeaders(micro.Headers(h)))
}

// errorMsg is the error reply respondError sends, as a message to reply:
// the same body and headers (micro's error headers included).
func errorMsg(reply string, mp bool, e *APIError) *nats.Msg {
	body, h := errorReply(mp, e)
	h[micro.ErrorHeader] = []string{errorDescription(e)}
	h[micro.ErrorCodeHeader] = []string{strconv.Itoa(e.Status)}
	return &nats.Msg{Subject: reply, Data: body, Header: h}
}

// errorReply is the body and headers of a NATS error reply.
func errorReply(mp bool, e *APIError) ([]byte, nats.Header) {
	body, err := msgpackjson.EncodeReply(wire.Envelope{Error: e}, mp)
	if err != nil {
		body = nil
	}
	h := nats.Header{"Content-Type": []string{contentType(mp)}, HeaderErrorCode: []string{e.Code}}
	if ra := retryAfter(e); ra != "" {
		h[wire.HeaderRetryAfter] = []string{ra}
	}
	return body, h
}

// errorDescription is the one-line text of micro's error header.
func errorDescription(e *APIError) string {
	if msg := oneLine(e.Message); msg != "" {
		return msg
	}
	return http.StatusText(e.Status)
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

// unknownOpEndpoint is the micro endpoint that answers unknown operations.
const unknownOpEndpoint = "unknown-operation"

// knownSubjects are the subject suffixes of the operations.
var knownSubjects = func() map[string]bool {
	m := make(map[string]bool, len(operations))
	for _, op := range operations {
		m[op.Subject] = true
	}
	for _, op := range liveOps {
		m[op.Subject] = true
	}
	return m
}()

// unknownOp answers a request whose subject names no operation with a
// not_found error listing the operations; it ignores the requests of known
// operations (their endpoints answer them).
func (a *API) unknownOp() micro.Handler {
	prefix := a.cfg.SubjectPrefix + "."
	return micro.HandlerFunc(func(r micro.Request) {
		_, suffix, _ := strings.Cut(strings.TrimPrefix(r.Subject(), prefix), ".")
		if knownSubjects[suffix] || replyAllowed(r.Reply()) != nil {
			return
		}
		subjects := make([]string, 0, len(operations))
		for _, op := range operations {
			subjects = append(subjects, op.Subject)
		}
		e := &APIError{Status: http.StatusNotFound, Code: wire.CodeNotFound,
			Message: fmt.Sprintf("no operation %q on subject %q: send to %s<channel>.<op>, op one of %s", clip.String(suffix, clip.Max), clip.String(r.Subject(), clip.Max), prefix, strings.Join(subjects, ", "))}
		a.respondError(r, wire.WantsMsgpack(r.Headers().Get("Accept")), e)
	})
}
