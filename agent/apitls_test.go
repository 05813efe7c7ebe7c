package agent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/internal/apitls"
	"github.com/mysqlha/mysqlha/testenv/testcerts"
)

// TestAPIOverTLS: with --api-tls-cert/--api-tls-key/--api-tls-ca, the API
// serves TLS; probes and scrapers read without a client certificate, but
// POST /failsafe, which holds a member back from failing over, needs a
// peer's verified one.
func TestAPIOverTLS(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := apitls.Files{Cert: certs.ServerCert, Key: certs.ServerKey, CA: certs.CA}
	serverCfg, err := files.Server()
	if err != nil {
		t.Fatal(err)
	}
	peerCfg, err := files.Client()
	if err != nil {
		t.Fatal(err)
	}
	a := fuzzAgent(t)
	a.self.PeerCertRequired = true
	srv := serveTLS(t, a.Handler(prometheus.NewRegistry()), serverCfg)

	caPEM, _ := os.ReadFile(certs.CA)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	peer := &http.Client{Transport: &http.Transport{TLSClientConfig: peerCfg}}
	untrusting := &http.Client{}

	if resp, err := anonymous.Get(srv + "/status"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /status without a client certificate: %v %v", resp, err)
	}
	if _, err := untrusting.Get(srv + "/status"); err == nil {
		t.Error("a client that does not trust the CA got in")
	}
	body := []byte(`{"leader":"db2","instance":"0123456789abcdef"}`)
	resp, err := anonymous.Post(srv+"/failsafe", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST /failsafe without a client certificate: %v %v, want 403", resp, err)
	}
	if err := HTTPPeerFailsafe(peer)(t.Context(), srv, FailsafeRequest{Leader: "db2", Instance: "0123456789abcdef"}); err != nil {
		t.Fatalf("POST /failsafe from a peer with its certificate: %v", err)
	}
}

func TestAPITLSFilesBadInput(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]apitls.Files{
		"cert without key": {Cert: certs.ServerCert},
		"key without cert": {Key: certs.ServerKey},
		"ca alone":         {CA: certs.CA},
		"missing cert":     {Cert: "/nonexistent.pem", Key: certs.ServerKey},
		"ca not a cert":    {Cert: certs.ServerCert, Key: certs.ServerKey, CA: certs.ServerKey},
		"name without ca":  {Cert: certs.ServerCert, Key: certs.ServerKey, ServerName: "mysqlha-agent"},
	} {
		if _, err := f.Server(); err == nil {
			t.Errorf("%s: Server() accepted %+v", name, f)
		}
	}
	if cfg, err := (apitls.Files{}).Server(); cfg != nil || err != nil {
		t.Errorf("no files: %v %v, want plain HTTP", cfg, err)
	}
}

// TestAPITLSServerName: peers' API URLs carry pod IPs, which no
// certificate made in advance names; with --api-tls-server-name a member
// verifies its peers by that name instead, and still refuses a
// certificate for any other name.
func TestAPITLSServerName(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "mysqlha-agent")
	if err != nil {
		t.Fatal(err)
	}
	serverCfg, err := apitls.Files{Cert: certs.ServerCert, Key: certs.ServerKey, CA: certs.CA}.Server()
	if err != nil {
		t.Fatal(err)
	}
	srv := serveTLS(t, fuzzAgent(t).Handler(prometheus.NewRegistry()), serverCfg)
	get := func(name string) error {
		cfg, err := apitls.Files{Cert: certs.ServerCert, Key: certs.ServerKey, CA: certs.CA, ServerName: name}.Client()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(srv + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(""); err == nil {
		t.Error("a certificate for mysqlha-agent was accepted for 127.0.0.1 without --api-tls-server-name")
	}
	if err := get("mysqlha-agent"); err != nil {
		t.Errorf("with --api-tls-server-name=mysqlha-agent: %v", err)
	}
	if err := get("another-name"); err == nil {
		t.Error("a certificate for mysqlha-agent was accepted as another-name")
	}
}

// serveTLS serves h with cfg as the agent does, and returns its https://
// URL. Not httptest's StartTLS: it puts its own certificate in
// cfg.Certificates, which a handshake without SNI (an IP address) prefers
// to the agent's GetCertificate.
func serveTLS(t *testing.T, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = tls.NewListener(srv.Listener, cfg)
	srv.Start()
	t.Cleanup(srv.Close)
	return "https://" + srv.Listener.Addr().String()
}
