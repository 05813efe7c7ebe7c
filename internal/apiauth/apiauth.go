// Package apiauth authenticates requests to the agent's HTTP API: a client
// certificate the server verified (API TLS with a CA), or a bearer token
// that every member of the cluster reads from the same Secret-mounted file.
// Health checks stay open, for the kubelet and for load balancers, but
// answer an unauthenticated caller with their status code and no data.
package apiauth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/mysqlha/mysqlha/internal/apitls"
)

// MinTokenLen is the shortest token accepted: 16 bytes of a random hex or
// base64 string carry 64 bits or more.
const MinTokenLen = 16

// ReadToken reads the token of file, named by flag in errors: the file's
// whole content without surrounding white space.
func ReadToken(flag, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("%s %s: the file is empty; put a random token in it, e.g. openssl rand -hex 32", flag, file)
	case len(token) < MinTokenLen:
		return "", fmt.Errorf("%s %s: the token is %d characters, fewer than %d; make a longer one, e.g. openssl rand -hex 32",
			flag, file, len(token), MinTokenLen)
	case strings.ContainsAny(token, " \t\r\n"):
		return "", fmt.Errorf("%s %s: the token holds white space; it must be one word, e.g. openssl rand -hex 32", flag, file)
	}
	return token, nil
}

// Guard decides who may read data or change state through the API.
type Guard struct {
	// Token is the bearer token; "" accepts none.
	Token string
	// Certs accepts a client certificate the TLS server verified.
	Certs bool
	// Open serves everything to everyone: --api-insecure, for a test on
	// one machine.
	Open bool
}

// ErrNoAuth is the start-up failure of an API that could authenticate
// nobody.
var ErrNoAuth = errors.New("the HTTP API needs a way to authenticate its callers: give --api-token-file " +
	"(a file with a random token, the same for every member: mount it from a Secret), or --api-tls-ca " +
	"(client certificates), or --api-insecure to serve it to anyone (a test on one machine only)")

// Check refuses a Guard that authenticates nobody.
func (g Guard) Check() error {
	if !g.Open && g.Token == "" && !g.Certs {
		return ErrNoAuth
	}
	return nil
}

// Allowed reports whether r is authenticated.
func (g Guard) Allowed(r *http.Request) bool {
	if g.Open || g.Certs && apitls.PeerVerified(r.TLS) {
		return true
	}
	if g.Token == "" {
		return false
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(g.Token)) == 1
}

// Protect serves h to authenticated requests only, except the health
// paths, which everyone may ask: an unauthenticated caller gets their
// status code and a one-word body, never the member's data. Everything
// else answers 401 without running h.
func (g Guard) Protect(h http.Handler, health ...string) http.Handler {
	open := map[string]bool{}
	for _, p := range health {
		open[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case g.Allowed(r):
			h.ServeHTTP(w, r)
		case open[r.URL.Path]:
			h.ServeHTTP(&statusOnly{ResponseWriter: w}, r)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="mysqlha"`)
			http.Error(w, "authentication required: send Authorization: Bearer <the cluster's API token>, "+
				"or a client certificate when the API serves TLS with a CA", http.StatusUnauthorized)
		}
	})
}

// statusOnly passes the status code on and replaces the body with the
// code's one-word meaning.
type statusOnly struct {
	http.ResponseWriter
	wrote bool
}

func (s *statusOnly) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	h := s.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	s.ResponseWriter.WriteHeader(code)
	word := "ok"
	if code >= 300 {
		word = "unavailable"
	}
	fmt.Fprintln(s.ResponseWriter, word)
}

func (s *statusOnly) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil // swallowed: the data is for authenticated callers
}

// Transport adds the bearer token to every request of base
// (http.DefaultTransport when nil); token "" adds nothing.
func Transport(base http.RoundTripper, token string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if token == "" {
		return base
	}
	return &bearer{base: base, token: token}
}

type bearer struct {
	base  http.RoundTripper
	token string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
