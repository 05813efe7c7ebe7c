package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/internal/apitls"
	"github.com/mysqlha/mysqlha/testenv/testcerts"
)

// deploy/ serves the agents' API over TLS with one certificate for a name
// (mysqlha-agent) at pod IPs: report reads each agent's /status with the
// CA and that name, and fails, naming the cause, without them.
func TestReportReadsAgentsOverTLS(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "mysqlha-agent")
	if err != nil {
		t.Fatal(err)
	}
	serverCfg, err := apitls.Files{Cert: certs.ServerCert, Key: certs.ServerKey, CA: certs.CA}.Server()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token-0123456789abcdef" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"name":"db1"}`))
	}))
	srv.TLS = serverCfg
	srv.StartTLS()
	defer srv.Close()
	url := srv.URL // an IP address, as the agents' URLs are

	cfg, err := agentTLS(certs.CA, "mysqlha-agent")
	if err != nil {
		t.Fatal(err)
	}
	body, err := agentStatus("token-0123456789abcdef", cfg, 5*time.Second)(context.Background(), url)
	if err != nil || string(body) != `{"name":"db1"}` {
		t.Fatalf("with the CA and the name: %q, %v", body, err)
	}
	if _, err := agentStatus("token-0123456789abcdef", nil, 5*time.Second)(context.Background(), url); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	if _, err := agentTLS("", "mysqlha-agent"); err == nil || !strings.Contains(err.Error(), "needs --api-tls-ca") {
		t.Fatalf("a server name without a CA: %v", err)
	}
	if _, err := agentTLS(certs.ServerKey, ""); err == nil || !strings.Contains(err.Error(), "--api-tls-ca") {
		t.Fatalf("a CA file that holds no certificate: %v", err)
	}
}
