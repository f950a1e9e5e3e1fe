package api

import "github.com/toolintent/engine/wire"

func contentType(msgpackReply bool) string {
	if msgpackReply {
		return wire.MIMEMsgpack
	}
	return wire.MIMEJSON
}
