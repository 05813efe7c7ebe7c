package onnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agents' API as deployed, asked from the host as anyone on the
// network could: it serves TLS only, verified by the name mysqlha-agent;
// without the token every endpoint but the health checks answers 401 and
// no data; the token alone does not open a member's backup stream or its
// failsafe promise, which need a member's certificate.
func TestAgentAPIAsDeployed(t *testing.T) {
	c := deployed(t)
	ctx := context.Background()
	primary := c.waitHealthy(time.Minute)
	sec, err := c.client.CoreV1().Secrets(namespace).Get(ctx, "mysqlha-api-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := c.client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, s := range creds.Items {
		if strings.HasPrefix(s.Name, "mysqlha-credentials") {
			token = string(s.Data["api-token"])
		}
	}
	roots := x509.NewCertPool()
	if token == "" || !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		t.Fatalf("no API token or CA in the Secrets (token %d bytes)", len(token))
	}
	member, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	client := func(name string, cert bool) *http.Client {
		cfg := &tls.Config{RootCAs: roots, ServerName: name}
		if cert {
			cfg.Certificates = []tls.Certificate{member}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	base := "https://" + primary.Status.PodIP + ":8008"
	ask := func(cl *http.Client, method, url, tok string) string {
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{"leader":"x","instance":"0123456789abcdef"}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	anyone, peer := client("mysqlha-agent", false), client("mysqlha-agent", true)
	for _, tc := range []struct {
		what, method, url, token string
		cl                       *http.Client
		want                     string
	}{
		{"plain HTTP", "GET", strings.Replace(base, "https", "http", 1) + "/status", "", &http.Client{Timeout: 5 * time.Second}, "400 Client sent an HTTP request to an HTTPS server"},
		{"another name", "GET", base + "/healthz", "", client("someone-else", false), "error: "},
		{"health check, no token", "GET", base + "/healthz", "", anyone, "200 "},
		{"status, no token", "GET", base + "/status", "", anyone, "401 "},
		{"metrics, no token", "GET", base + "/metrics", "", anyone, "401 "},
		{"clone, no token", "GET", base + "/clone?member=" + primary.Name, "", anyone, "401 "},
		{"failsafe, no token", "POST", base + "/failsafe", "", anyone, "401 "},
		{"status, token", "GET", base + "/status", token, anyone, "200 {"},
		{"clone, token, no certificate", "GET", base + "/clone?member=" + primary.Name, token, anyone, "403 GET /clone needs a client certificate"},
		{"failsafe, token, no certificate", "POST", base + "/failsafe", token, anyone, "403 POST /failsafe needs a client certificate"},
		{"clone, a member's certificate, no rebuild pending", "GET", base + "/clone?member=" + primary.Name, token, peer, "409 "},
	} {
		got := ask(tc.cl, tc.method, tc.url, tc.token)
		t.Logf("%-48s %s %s -> %.110s", tc.what, tc.method, strings.TrimPrefix(tc.url, base), got)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %s %s answered %q, want %q...", tc.what, tc.method, tc.url, got, tc.want)
		}
		if strings.HasPrefix(tc.want, "401") && strings.Contains(got, "gtid") {
			t.Errorf("%s: a refusal carried data: %q", tc.what, got)
		}
	}
}
