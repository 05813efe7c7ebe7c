// Package kubetest starts a real kube-apiserver (and, on request, a real
// kube-controller-manager), not fakes, and is used by both the tests and the
// demo. They are the upstream binaries (built from k8s.io/kubernetes
// KubernetesVersion by `make kube-bin`), run as child processes, with a real
// etcd from etcdtest as storage; the tests of the Kubernetes DCS, the agent,
// deploy and e2e, and the demo's Kubernetes mode all run on them. The name
// follows Go's httptest: a helper for tests, not a test double.
//
// Start and Launch guarantee that, when they return, /readyz answers ok, RBAC
// is the only authorizer, and two static token users exist: an admin (group
// system:masters) and an unprivileged user, who has no RBAC bindings at all
// (every request is 403 until a test binds a Role to it); their names are
// AdminUser and UnprivilegedUser unless WithUserNames. Start's server is
// stopped by tb.Cleanup; Launch, for programs without a testing.TB (the
// demo), leaves that to the caller (Close). Either way the apiserver dies
// with the process that started it even if that panics or is killed
// (Pdeathsig).
//
// Choices, and why:
//   - Serving certificate: the package makes its own CA and serving
//     certificate (ECDSA, fast) instead of letting the apiserver self-sign
//     into --cert-dir, so that Config can verify TLS properly and the
//     certificate also covers the advertise address (a bridge IP for agents in
//     network namespaces, see WithAdvertiseAddress).
//   - The ServiceAccount admission plugin is disabled: it would reject every
//     Pod in a namespace whose "default" ServiceAccount has not been created by
//     the serviceaccount controller, which does not run unless
//     StartControllerManager is called. No kubelet runs here, so the token
//     volume it injects would never be used anyway. ServiceAccounts and the
//     TokenRequest API still work (the signing key is configured).
//   - --endpoint-reconciler-type=none: the apiserver would otherwise write its
//     advertise address into the default/kubernetes Endpoints, which rejects
//     loopback addresses; upstream's own test server does the same.
//   - --enable-priority-and-fairness=false: fewer start-up hooks and no
//     request queuing in tests.
//
// The first two are defaults for tests of the API alone. A real node (package
// e2e/realnode) turns them around with WithServiceAccountAdmission and
// WithEndpointReconciler, and adds WithNodeAuthorization,
// WithKubeletClientCert, WithServiceClusterIPRange and WithTokenUser.
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

const (
	// KubernetesVersion is the k8s.io/kubernetes release whose binaries the
	// harness runs; they live in <repo>/bin/k8s-<KubernetesVersion>/.
	KubernetesVersion = "v1.37.2"

	// AdminUser is the user name of Config's token (group system:masters)
	// unless WithUserNames.
	AdminUser = "kubetest-admin"
	// UnprivilegedUser is the user name of UnprivilegedConfig's token unless
	// WithUserNames. It is authenticated (group system:authenticated only)
	// but has no RBAC bindings: tests use it for 403s and to grant
	// least-privilege Roles.
	UnprivilegedUser = "kubetest-unprivileged"

	// ServiceClusterIPRange is only an allocation range inside the apiserver;
	// nothing ever sends traffic to it.
	ServiceClusterIPRange = "10.96.0.0/16"

	// ServiceAccountIssuer is the issuer of service account tokens.
	ServiceAccountIssuer = "https://kubernetes.default.svc"

	readyTimeout = 60 * time.Second
	stopGrace    = 10 * time.Second
	// startAttempts: the secure port is picked by binding :0 and closing it,
	// so another process may take it first; a start that fails on "address
	// already in use" is retried on a new port.
	startAttempts = 3
	module        = "github.com/mysqlha/mysqlha"
)

// APIServer is a running kube-apiserver.
type APIServer struct {
	// Etcd is the apiserver's storage, in Dir()/etcd.
	Etcd *etcdtest.Server

	dir         string
	binDir      string
	url         string
	caPEM       []byte
	adminUser   string
	adminToken  string
	unprivUser  string
	unprivToken string
	saKeyFile   string
	logFile     string
	proc        *process
	bin         string
	port        int
	bindAddress string
	advertise   string
	opts        options
}

// BinDir returns the directory holding kube-apiserver and
// kube-controller-manager: $KUBE_BIN_DIR if set, else
// <repo root>/bin/k8s-<KubernetesVersion>, the repo root being the nearest
// directory above the working directory whose go.mod declares this module.
func BinDir() (string, error) {
	if d := os.Getenv("KUBE_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s-"+KubernetesVersion), nil
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == module {
					return dir, nil
				}
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s; set KUBE_BIN_DIR", module, wd)
		}
	}
}

// binary returns the path of a control-plane binary in dir (BinDir() when
// empty), or an error that names the fix.
func binary(dir, name string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = BinDir(); err != nil {
			return "", fmt.Errorf("kubetest: locating %s: %w", name, err)
		}
	}
	p := filepath.Join(dir, name)
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("kubetest: %s not found at %s: run `make kube-bin` (builds k8s.io/kubernetes %s into bin/, ~8 min the first time), or set KUBE_BIN_DIR",
			name, p, KubernetesVersion)
	}
	return p, nil
}

// Start starts etcd and a kube-apiserver in tb.TempDir() (see Launch),
// failing tb if /readyz does not answer ok within 60 s (with the tail of the
// apiserver log), and registers the shutdown of both with tb.Cleanup.
func Start(tb testing.TB, opts ...Option) *APIServer {
	tb.Helper()
	s, err := Launch(tb.TempDir(), opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Launch starts an embedded etcd and a kube-apiserver on it, with the
// certificates, the token file, the log and etcd's data in dir (created if
// missing), and waits until /readyz answers ok (60 s at most; the error then
// holds the tail of the apiserver log). The caller owns both: Close ends them
// (Stop or Kill end the apiserver alone), and dir is left in place.
func Launch(dir string, opts ...Option) (*APIServer, error) {
	o := options{bindAddress: "127.0.0.1", adminUser: AdminUser, unprivilegedUser: UnprivilegedUser}
	for _, opt := range opts {
		opt(&o)
	}
	bind := net.ParseIP(o.bindAddress)
	if bind == nil {
		return nil, fmt.Errorf("kubetest: bind address %q is not an IP", o.bindAddress)
	}
	if o.advertiseAddress == "" {
		o.advertiseAddress = o.bindAddress
		if bind.IsUnspecified() {
			o.advertiseAddress = "127.0.0.1"
		}
	}
	if net.ParseIP(o.advertiseAddress) == nil || net.ParseIP(o.advertiseAddress).IsUnspecified() {
		return nil, fmt.Errorf("kubetest: advertise address %q is not a usable IP", o.advertiseAddress)
	}
	if !validUserName(o.adminUser) || !validUserName(o.unprivilegedUser) || o.adminUser == o.unprivilegedUser {
		return nil, fmt.Errorf("kubetest: user names %q and %q: want two different names without commas, quotes or line breaks",
			o.adminUser, o.unprivilegedUser)
	}
	if err := o.validateNodeOptions(); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}

	bin, err := binary(o.binDir, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	s := &APIServer{
		dir:         dir,
		binDir:      filepath.Dir(bin),
		adminUser:   o.adminUser,
		unprivUser:  o.unprivilegedUser,
		bindAddress: o.bindAddress,
		advertise:   o.advertiseAddress,
		opts:        o,
	}
	if err := s.writeFiles(); err != nil {
		return nil, fmt.Errorf("kubetest: preparing apiserver files: %w", err)
	}
	if s.Etcd, err = etcdtest.Launch(filepath.Join(dir, "etcd")); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = s.start(bin); err == nil {
			return s, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	s.Etcd.Stop()
	return nil, fmt.Errorf("kubetest: %w", err)
}

// start runs kube-apiserver on a free port and waits until it is ready.
func (s *APIServer) start(bin string) error {
	port, err := freePort(s.bindAddress)
	if err != nil {
		return err
	}
	s.bin, s.port = bin, port
	s.url = "https://" + net.JoinHostPort(s.advertise, strconv.Itoa(port))
	return s.launch()
}

// Restart starts the apiserver again after Stop or Kill, on the same URL,
// certificates and etcd: its clients (a kubelet, agents) keep their
// configuration, as after a real restart. Tests take the API server down and
// bring it back with Stop (or Kill) and Restart.
func (s *APIServer) Restart() error {
	select {
	case <-s.proc.exited:
	default:
		return fmt.Errorf("kubetest: restarting kube-apiserver %s: it is still running; Stop or Kill it first", s.url)
	}
	if err := s.launch(); err != nil {
		return fmt.Errorf("kubetest: restarting kube-apiserver: %w", err)
	}
	return nil
}

// launch runs kube-apiserver on s.port and waits until it is ready.
func (s *APIServer) launch() error {
	bin, port := s.bin, s.port
	hc, err := s.httpClient(s.adminToken)
	if err != nil {
		return err
	}

	f := func(name string) string { return filepath.Join(s.dir, name) }
	args := []string{
		"--etcd-servers=" + strings.Join(s.Etcd.Endpoints()[:1], ","),
		"--bind-address=" + s.bindAddress,
		"--secure-port=" + strconv.Itoa(port),
		"--advertise-address=" + s.advertise,
		"--cert-dir=" + f("cert-dir"),
		"--tls-cert-file=" + f("serving.crt"),
		"--tls-private-key-file=" + f("serving.key"),
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + f("sa.key"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--token-auth-file=" + f("tokens.csv"),
		"--service-cluster-ip-range=" + s.opts.serviceIPRange,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if !s.opts.endpointReconciler {
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if s.opts.nodeAuthorization {
		args = append(args, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction")
	} else {
		args = append(args, "--authorization-mode=RBAC")
	}
	if !s.opts.saAdmission {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if s.opts.kubeletClientCert {
		args = append(args,
			"--kubelet-client-certificate="+f("kubelet-client.crt"),
			"--kubelet-client-key="+f("kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP")
	}
	args = append(args, s.opts.extraArgs...)
	s.proc, err = launchProcess("kube-apiserver "+s.url, bin, s.dir, s.logFile, args, func(ctx context.Context) error {
		return s.readyz(ctx, hc)
	})
	return err
}

// readyz asks GET /readyz once.
func (s *APIServer) readyz(ctx context.Context, hc *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

func (s *APIServer) httpClient(token string) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.caPEM) {
		return nil, errors.New("bad CA PEM")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	return &http.Client{Transport: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("Authorization", "Bearer "+token)
		return tr.RoundTrip(r)
	})}, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("no free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop shuts the apiserver down gracefully (SIGTERM, then SIGKILL after
// 10 s) and waits for it to exit; etcd keeps running until Close (for Start:
// until cleanup). A graceful shutdown takes 1 to 4 s, most of it idle waiting
// inside the apiserver. Stop and Kill are idempotent; only the first call of
// either acts.
func (s *APIServer) Stop() { s.proc.stop() }

// Kill stops the apiserver at once with SIGKILL, as a crash would, and waits
// for it to exit (milliseconds). It is what Close does: etcd and all state are
// thrown away afterwards, so a graceful shutdown would only cost time. Tests
// simulating an unreachable API server can use either.
func (s *APIServer) Kill() { s.proc.killOnce() }

// Close kills the apiserver (Kill) and then stops its etcd: the end of the
// whole server, run by tb.Cleanup for Start. It is idempotent. A controller
// manager started on the server is to be stopped first.
func (s *APIServer) Close() {
	s.Kill()
	s.Etcd.Stop()
}

// Pid returns the apiserver's process id.
func (s *APIServer) Pid() int { return s.proc.pid() }

// URL returns the apiserver's base URL, https://<advertise address>:<port>.
func (s *APIServer) URL() string { return s.url }

// CAPEM returns the PEM of the CA that signed the serving certificate.
func (s *APIServer) CAPEM() []byte { return append([]byte(nil), s.caPEM...) }

// Dir returns the directory (Start's is a tb.TempDir) holding ca.crt (the
// PEM of CAPEM), the serving certificate, the token file, sa.key,
// kube-apiserver.log and etcd's data and log in etcd/.
func (s *APIServer) Dir() string { return s.dir }

// LogFile returns the path of the apiserver's combined stdout and stderr.
func (s *APIServer) LogFile() string { return s.logFile }
