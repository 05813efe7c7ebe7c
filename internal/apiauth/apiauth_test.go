package apiauth

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const token = "0123456789abcdef0123456789abcdef"

// secret answers with data a stranger must not see.
var secret = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" && r.URL.Query().Get("down") != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	io.WriteString(w, `{"gtid_executed":"0-1-42","secret":"yes"}`)
})

func call(t *testing.T, h http.Handler, path string, tweak func(*http.Request)) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if tweak != nil {
		tweak(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestProtect(t *testing.T) {
	h := Guard{Token: token}.Protect(secret, "/readyz")
	withToken := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", v) }
	}
	cases := []struct {
		name, path string
		tweak      func(*http.Request)
		code       int
		data       bool
	}{
		{"no credentials", "/status", nil, 401, false},
		{"wrong token", "/clone", withToken("Bearer " + strings.Repeat("x", len(token))), 401, false},
		{"a prefix of the token", "/clone", withToken("Bearer " + token[:20]), 401, false},
		{"basic, not bearer", "/status", withToken("Basic " + token), 401, false},
		{"the token", "/status", withToken("Bearer " + token), 200, true},
		{"lower-case scheme", "/metrics", withToken("bearer " + token), 200, true},
		{"a verified-looking cert without Certs", "/status", func(r *http.Request) {
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
		}, 401, false},
		{"health, stranger", "/readyz", nil, 200, false},
		{"health down, stranger", "/readyz?down=1", nil, 503, false},
		{"health, the token", "/readyz", withToken("Bearer " + token), 200, true},
	}
	for _, tc := range cases {
		code, body := call(t, h, tc.path, tc.tweak)
		if code != tc.code || strings.Contains(body, "secret") != tc.data {
			t.Errorf("%s: %d %q, want %d with data %v", tc.name, code, body, tc.code, tc.data)
		}
	}
}

func TestCertsAndOpen(t *testing.T) {
	verified := func(r *http.Request) { r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}} }
	unverified := func(r *http.Request) { r.TLS = &tls.ConnectionState{} }
	h := Guard{Certs: true}.Protect(secret)
	if code, _ := call(t, h, "/status", verified); code != 200 {
		t.Errorf("verified client certificate: %d", code)
	}
	if code, _ := call(t, h, "/status", unverified); code != 401 {
		t.Errorf("TLS without a client certificate: %d", code)
	}
	if code, _ := call(t, h, "/status", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }); code != 401 {
		t.Errorf("empty bearer with no token configured: %d", code)
	}
	if code, _ := call(t, Guard{Open: true}.Protect(secret), "/clone", nil); code != 200 {
		t.Errorf("--api-insecure: %d", code)
	}
	if err := (Guard{}).Check(); err != ErrNoAuth {
		t.Errorf("a guard that admits nobody: %v", err)
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := ReadToken("--api-token-file", write("good", token+"\n")); err != nil || got != token {
		t.Fatalf("good token: %q, %v", got, err)
	}
	for name, c := range map[string]struct{ content, want string }{
		"empty":  {"\n", "the file is empty"},
		"short":  {"abc", "fewer than 16"},
		"spaced": {"0123456789 abcdef0123", "white space"},
	} {
		_, err := ReadToken("--api-token-file", write(name, c.content))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--api-token-file") {
			t.Errorf("%s: %v, want %q naming the flag", name, err, c.want)
		}
	}
	if _, err := ReadToken("--api-token-file", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// Transport sends the token; the guard admits it end to end.
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(Guard{Token: token}.Protect(secret))
	defer srv.Close()
	for name, c := range map[string]struct {
		client *http.Client
		code   int
	}{
		"with the token":    {&http.Client{Transport: Transport(nil, token)}, 200},
		"without any token": {&http.Client{Transport: Transport(nil, "")}, 401},
	} {
		resp, err := c.client.Get(srv.URL + "/status")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.code)
		}
	}
}
