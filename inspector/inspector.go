// Package inspector serves the session inspector: a static web page (plain
// HTML, CSS and a little JavaScript, embedded, no build step) that reads
// the engine's HTTP API from the same origin and shows, for one session,
// its event timeline (clickable to travel back in time), the intent at
// that point, the resolved tools split into resident and catalog with
// their token budget, the last checkpoint and contract hash, each turn's
// provider requests with their tools prefix hash and the cause of every
// prompt-cache break, the channel policy (its version, the withheld tools
// with their rules, the recorded answers to "ask" decisions, and a
// call-check form), and, on demand, why each registry tool is in or out.
//
// Mount it on the engine's HTTP mux next to the API:
//
//	mux.Handle("/inspector/", inspector.Handler())
//
// A link opens one session: /inspector/?session=ID (or #session=ID), with
// &until=SEQ for a point in the past. The view of "now" follows the
// session live: the page reads the session's event stream (GET
// /v1/sessions/{id}/events/live, Server-Sent Events) and re-renders
// when an event newer than the view arrives, refreshing the session list
// every 15 s; where the stream cannot be opened it polls the session's
// sequence every 1.5 s instead. The session list is paged (50 a page) in the
// page. While the engine does not answer, the page shows one message and
// an "offline" badge, and loads the view again once it answers.
//
// Opening a session costs a handful of requests, each bounded whatever
// the registry holds: /v1/sessions, one page of /v1/registry, /v1/budget,
// the pages of /v1/sessions/{id}/history and one .../resolve without its
// rendering (plus one explain or call-check per withheld tool shown, 20
// at most). The session is shown as its backend sends it: rendered for
// the provider its turn was begun for (the TurnStarted records it), else
// the API's default, native deferral. The explain card reads a page of
// 50 registry tools (filtered by name on the engine) and explains them in
// one explain-batch, only once it is opened. The call-check form POSTs
// .../turn/call-check, which writes nothing; the page writes nothing.
package inspector

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the path the page is served under.
const Prefix = "/inspector/"

//go:embed static
var files embed.FS

// static is the page's files, rooted at static/.
var static = func() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic("inspector: embedded static directory: " + err.Error())
	}
	return sub
}()

// Handler serves the inspector page and its assets under Prefix
// (/inspector/ is the page, /inspector/app.js and /inspector/style.css its
// assets); /inspector redirects to /inspector/. Only GET and HEAD are
// allowed. Responses carry a strict same-origin Content-Security-Policy.
func Handler() http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method "+r.Method+" is not allowed on "+r.URL.Path+": the inspector is read-only, use GET", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.Error(w, "no inspector page at "+r.URL.Path+": open "+Prefix, http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		r2.URL.RawPath = ""
		files.ServeHTTP(w, r2)
	})
}
