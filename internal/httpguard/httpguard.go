// Package httpguard holds the checks every route of the engine's HTTP
// server needs, the API's and the inspector's and
// metrics' alike: the Host header must name the engine (no DNS
// rebinding), and a browser may not write from another origin (CSRF).
package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolintent/engine/internal/clip"
)

// Guard is the names the engine answers to and the origins it trusts.
// The zero value accepts localhost, 127.0.0.1 and [::1] on any port and
// no other origin.
type Guard struct {
	// Hosts are the Host header values accepted (a name, or name:port).
	// Default: localhost, 127.0.0.1 and [::1] on any port.
	Hosts []string
	// Origins are the origins (scheme://host[:port]) whose browser pages
	// may send writes besides the engine's own (ParseOrigin checks each).
	Origins []string
}

// ParseOrigin checks an allowed origin: scheme://host[:port], no path;
// it returns it normalised.
func ParseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", fmt.Errorf("allowed origin %q: want scheme://host[:port], e.g. https://console.example.com", o)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Protect wraps next with the checks:
//   - the Host header must name the engine (Hosts): a page whose DNS name
//     was rebound to the engine's address sends its own name and is
//     refused;
//   - a browser request with an unsafe method from another origin
//     (Sec-Fetch-Site, or Origin against Host) is refused unless the
//     origin is in Origins: no cross-site form or fetch writes.
//
// refuse answers a refused request; msg says why.
func (g Guard) Protect(next http.Handler, refuse func(w http.ResponseWriter, r *http.Request, msg string)) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range g.Origins {
		if norm, err := ParseOrigin(o); err == nil {
			_ = cop.AddTrustedOrigin(norm)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse(w, r, fmt.Sprintf("cross-origin %s from %s refused: the engine accepts writes only from its own pages (or serve --http-origin)", r.Method, clip.String(originOf(r), clip.Max)))
	}))
	protected := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			refuse(w, r, fmt.Sprintf("Host %q is not a name of this engine (%s): reach it by one of those, or add the name with serve --http-host", clip.String(r.Host, clip.Max), strings.Join(g.hostNames(), ", ")))
			return
		}
		protected.ServeHTTP(w, r)
	})
}

func originOf(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return "a " + s + " page"
	}
	return "another origin"
}

func (g Guard) hostNames() []string {
	if len(g.Hosts) > 0 {
		return g.Hosts
	}
	return []string{"localhost", "127.0.0.1", "[::1]"}
}

// hostAllowed matches a Host header against the configured names: a name
// without a port matches any port.
func (g Guard) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	return slices.ContainsFunc(g.hostNames(), func(want string) bool {
		if strings.EqualFold(want, host) {
			return true
		}
		if _, _, err := net.SplitHostPort(want); err == nil {
			return false // a name with a port matches only exactly
		}
		return strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(want, "["), "]"), name)
	})
}
