package deploy

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/internal/apitls"
)

const (
	makeAPITLS      = "tls/make-api-tls.sh"
	certManagerYAML = "tls/cert-manager.yaml"
	apiTLSSecret    = "mysqlha-api-tls"
)

// TestAPITLSIsOn: every variant serves the agents' API over TLS from the
// Secret mysqlha-api-tls, verifies peers by the name the cert-manager
// example issues, advertises https, probes over HTTPS, and gives the
// preStop hook the plain health listener on loopback.
func TestAPITLSIsOn(t *testing.T) {
	name := certManagerName(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, v.dir))
			spec := &sts.Spec.Template.Spec
			agentC := mustContainer(t, spec.Containers, "agent")
			server := mustContainer(t, spec.Containers, v.serverContainer)
			args := map[string]string{}
			for _, a := range agentC.Args {
				if k, val, ok := strings.Cut(a, "="); ok {
					args[k] = val
				}
			}
			for flag, key := range map[string]string{"--api-tls-cert": "tls.crt", "--api-tls-key": "tls.key", "--api-tls-ca": "ca.crt"} {
				if got, secret := mountedSecretKey(spec, agentC, args[flag]); secret != apiTLSSecret || got != key {
					t.Errorf("%s=%q is key %q of Secret %q, want key %s of %s", flag, args[flag], got, secret, key, apiTLSSecret)
				}
			}
			if args["--api-tls-server-name"] != name {
				t.Errorf("--api-tls-server-name=%q, want %q, the name tls/cert-manager.yaml issues", args["--api-tls-server-name"], name)
			}
			if !strings.HasPrefix(args["--advertise-api-url"], "https://") {
				t.Errorf("--advertise-api-url=%q, want https://", args["--advertise-api-url"])
			}
			for what, p := range map[string]*corev1.Probe{"readiness": agentC.ReadinessProbe, "liveness": agentC.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("agent %s probe %+v, want HTTPS", what, p)
				}
			}
			host, port, err := net.SplitHostPort(args["--health-listen"])
			if err != nil || host != "127.0.0.1" {
				t.Errorf("--health-listen=%q, want loopback only: it answers without TLS (%v)", args["--health-listen"], err)
			}
			env := resolvePodEnv(t, spec, server, testPod)
			if !slices.Contains(env, "MYSQLHA_API_PORT="+port) {
				t.Errorf("the preStop hook's MYSQLHA_API_PORT is not the health listener's port %s: %q", port, env)
			}
		})
	}
}

// certManagerName checks the cert-manager example's leaf Certificate and
// returns the name it issues.
func certManagerName(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(certManagerYAML)
	if err != nil {
		t.Fatal(err)
	}
	type certificate struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			IsCA       bool     `json:"isCA"`
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
			Usages     []string `json:"usages"`
			IssuerRef  struct {
				Name string `json:"name"`
			} `json:"issuerRef"`
		} `json:"spec"`
	}
	var leaf *certificate
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var c certificate
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			t.Fatalf("%s: %v", certManagerYAML, err)
		}
		if c.Kind == "Certificate" && !c.Spec.IsCA {
			leaf = &c
		}
	}
	if leaf == nil {
		t.Fatalf("%s has no leaf Certificate", certManagerYAML)
	}
	s := leaf.Spec
	if s.SecretName != apiTLSSecret || len(s.DNSNames) != 1 || !slices.Contains(s.Usages, "server auth") || !slices.Contains(s.Usages, "client auth") {
		t.Fatalf("%s's Certificate %s: %+v; want Secret %s, one DNS name, server and client auth", certManagerYAML, leaf.Metadata.Name, s, apiTLSSecret)
	}
	return s.DNSNames[0]
}

// TestMakeAPITLSScript: the script's CA and certificate are what the
// agents load; a member verifies a peer reached at an IP address by the
// name, and refuses another name; a second run keeps the CA and renews
// the certificate; bad input is refused with the reason.
func TestMakeAPITLSScript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if out, code := runScript(t, cleanEnv(), makeAPITLS, dir); code != 0 {
		t.Fatalf("make-api-tls.sh: exit %d: %s", code, out)
	}
	files := apitls.Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), CA: filepath.Join(dir, "ca.crt"), ServerName: "mysqlha-agent"}
	serverCfg, err := files.Server()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "no client certificate", http.StatusForbidden)
		}
	}))
	srv.Listener = tls.NewListener(srv.Listener, serverCfg)
	srv.Start()
	defer srv.Close()
	url := "https://" + srv.Listener.Addr().String()
	get := func(f apitls.Files) error {
		cfg, err := f.Client()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return &statusError{resp.Status}
		}
		return nil
	}
	if err := get(files); err != nil {
		t.Fatalf("a member calling a peer with the script's files: %v", err)
	}
	other := files
	other.ServerName = "someone-else"
	if err := get(other); err == nil {
		t.Error("the certificate passed for another name")
	}

	ca, _ := os.ReadFile(files.CA)
	cert, _ := os.ReadFile(files.Cert)
	if out, code := runScript(t, cleanEnv(), makeAPITLS, dir); code != 0 || !strings.Contains(out, "keeping the CA") {
		t.Fatalf("second run: exit %d: %s", code, out)
	}
	ca2, _ := os.ReadFile(files.CA)
	cert2, _ := os.ReadFile(files.Cert)
	if string(ca2) != string(ca) || string(cert2) == string(cert) {
		t.Fatal("a second run must keep the CA and renew the certificate")
	}
	if err := get(files); err != nil {
		t.Fatalf("after the renewal: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key: %v, %v; want mode 0600", st, err)
	}

	half := t.TempDir()
	os.WriteFile(filepath.Join(half, "ca.crt"), ca, 0o600)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage: make-api-tls.sh DIR [NAME] [DAYS]"},
		{[]string{t.TempDir(), "Not A Name"}, 2, `NAME "Not A Name" must be a DNS name`},
		{[]string{t.TempDir(), "mysqlha-agent", "0"}, 2, `DAYS "0" must be a positive whole number`},
		{[]string{half}, 1, "has only one of ca.crt and ca.key"},
	} {
		out, code := runScript(t, cleanEnv(), makeAPITLS, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.msg) {
			t.Errorf("make-api-tls.sh %q: exit %d %q, want exit %d with %q", tc.args, code, out, tc.code, tc.msg)
		}
	}
}

type statusError struct{ status string }

func (e *statusError) Error() string { return e.status }
