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
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mysqlha/mysqlha/dcs/etcd/etcdtest"
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

// Option configures Start and Launch.
type Option func(*options)

type options struct {
	bindAddress        string
	advertiseAddress   string
	binDir             string
	adminUser          string
	unprivilegedUser   string
	serviceIPRange     string
	endpointReconciler bool
	saAdmission        bool
	nodeAuthorization  bool
	kubeletClientCert  bool
	tokenUsers         []tokenUser
	extraArgs          []string
}

// tokenUser is an extra line of the token file (WithTokenUser).
type tokenUser struct {
	name   string
	groups []string
	token  string
}

// WithBindAddress sets --bind-address: "0.0.0.0" to serve on every local
// address (loopback and test bridges), or one local IP. The default is
// 127.0.0.1.
func WithBindAddress(ip string) Option {
	return func(o *options) { o.bindAddress = ip }
}

// WithAdvertiseAddress sets the IP that URL, Config and WriteKubeconfig use
// and that the serving certificate is valid for (besides 127.0.0.1 and
// localhost, which it always covers). Agents in network namespaces need the
// bridge's IP here, together with WithBindAddress("0.0.0.0") or the same IP.
// The default is the bind address, or 127.0.0.1 when that is 0.0.0.0.
func WithAdvertiseAddress(ip string) Option {
	return func(o *options) { o.advertiseAddress = ip }
}

// WithBinDir runs kube-apiserver (and kube-controller-manager) from dir
// instead of BinDir().
func WithBinDir(dir string) Option {
	return func(o *options) { o.binDir = dir }
}

// WithUserNames names the admin and the unprivileged token users instead of
// AdminUser and UnprivilegedUser, so that RBAC bindings, Events and logs show
// a program's own identities (the demo's agents are "mysqlha-agent"). A name
// must not contain a comma, a quote or a line break (the token file is CSV).
func WithUserNames(admin, unprivileged string) Option {
	return func(o *options) { o.adminUser, o.unprivilegedUser = admin, unprivileged }
}

// WithServiceClusterIPRange sets --service-cluster-ip-range (default
// ServiceClusterIPRange) and adds its first address, the ClusterIP of the
// default/kubernetes Service, to the serving certificate, so that in-cluster
// clients (KUBERNETES_SERVICE_HOST) verify it. A real node sends traffic to
// this range (kube-proxy): use one in 198.18.0.0/15 there.
func WithServiceClusterIPRange(cidr string) Option {
	return func(o *options) { o.serviceIPRange = cidr }
}

// WithEndpointReconciler lets the apiserver maintain the default/kubernetes
// Endpoints and EndpointSlice with its advertise address and port, as in a
// real cluster (--endpoint-reconciler-type=lease), instead of
// --endpoint-reconciler-type=none. The advertise address must not be
// loopback: Endpoints reject it.
func WithEndpointReconciler() Option {
	return func(o *options) { o.endpointReconciler = true }
}

// WithServiceAccountAdmission keeps the ServiceAccount admission plugin on,
// so that Pods get the namespace's default ServiceAccount and a projected
// token volume. Pods are then rejected until the serviceaccount controller
// (StartControllerManager) has created that ServiceAccount.
func WithServiceAccountAdmission() Option {
	return func(o *options) { o.saAdmission = true }
}

// WithNodeAuthorization authorizes with Node,RBAC instead of RBAC alone and
// enables the NodeRestriction admission plugin, so that a kubelet can run
// as system:node:<name> in group system:nodes (see WithTokenUser) with no
// more rights than a real one.
func WithNodeAuthorization() Option {
	return func(o *options) { o.nodeAuthorization = true }
}

// WithKubeletClientCert gives the apiserver a client certificate (signed by
// the CA of ca.crt, group system:masters) for the kubelet API, and makes it
// reach kubelets at their InternalIP, so that logs, exec and port-forward
// work with a kubelet whose x509 clientCAFile is CAFile().
func WithKubeletClientCert() Option {
	return func(o *options) { o.kubeletClientCert = true }
}

// WithTokenUser adds a static token user with groups (e.g.
// "system:node:n1" in "system:nodes", or "system:kube-proxy"), whose
// configuration UserConfig and SaveUserKubeconfig return. The rules of
// WithUserNames apply to the name and to each group.
func WithTokenUser(name string, groups ...string) Option {
	return func(o *options) {
		o.tokenUsers = append(o.tokenUsers, tokenUser{name: name, groups: append([]string(nil), groups...)})
	}
}

// WithAPIServerArgs appends args to the kube-apiserver command line, e.g.
// "--allow-privileged=true". Only for flags the package does not set: a
// repeated list flag would append to the package's value, not replace it.
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.extraArgs = append(o.extraArgs, args...) }
}

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

// validateNodeOptions checks the options that a real node needs.
func (o *options) validateNodeOptions() error {
	if o.serviceIPRange == "" {
		o.serviceIPRange = ServiceClusterIPRange
	}
	if _, err := firstServiceIP(o.serviceIPRange); err != nil {
		return err
	}
	if o.endpointReconciler && net.ParseIP(o.advertiseAddress).IsLoopback() {
		return fmt.Errorf("WithEndpointReconciler needs a non-loopback advertise address, not %s", o.advertiseAddress)
	}
	seen := map[string]bool{o.adminUser: true, o.unprivilegedUser: true}
	for _, u := range o.tokenUsers {
		if !validUserName(u.name) || seen[u.name] {
			return fmt.Errorf("token user %q: want a new name without commas, quotes or line breaks", u.name)
		}
		seen[u.name] = true
		for _, g := range u.groups {
			if !validUserName(g) {
				return fmt.Errorf("token user %q: group %q: want no commas, quotes or line breaks", u.name, g)
			}
		}
	}
	return nil
}

// firstServiceIP returns the first address of a service CIDR: the ClusterIP
// the apiserver gives the default/kubernetes Service.
func firstServiceIP(cidr string) (net.IP, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service cluster IP range %q: %w", cidr, err)
	}
	ip := append(net.IP(nil), ipnet.IP...)
	for i := len(ip) - 1; i >= 0; i-- {
		if ip[i]++; ip[i] != 0 {
			break
		}
	}
	if !ipnet.Contains(ip) {
		return nil, fmt.Errorf("service cluster IP range %q has no usable address", cidr)
	}
	return ip, nil
}

// writeFiles generates the CA, serving certificate, service-account key and
// token file in s.dir.
func (s *APIServer) writeFiles() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	serviceIP, err := firstServiceIP(s.opts.serviceIPRange)
	if err != nil {
		return err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), serviceIP, net.ParseIP(s.advertise)}
	if ip := net.ParseIP(s.bindAddress); !ip.IsUnspecified() {
		ips = append(ips, ip)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: ips,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return err
	}
	// The service-account key is RSA as in real clusters (RS256 tokens).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	s.adminToken, s.unprivToken = randomToken(), randomToken()
	s.saKeyFile = filepath.Join(s.dir, "sa.key")
	s.logFile = filepath.Join(s.dir, "kube-apiserver.log")
	// token,user,uid,"groups"
	tokens := fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		s.adminToken, s.adminUser, s.adminUser, s.unprivToken, s.unprivUser, s.unprivUser)
	for i := range s.opts.tokenUsers {
		u := &s.opts.tokenUsers[i]
		u.token = randomToken()
		tokens = fmt.Appendf(tokens, "%s,%s,%s,\"%s\"\n", u.token, u.name, u.name, strings.Join(u.groups, ","))
	}
	files := map[string][]byte{
		"ca.crt":      s.caPEM,
		"serving.crt": append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), s.caPEM...),
		"serving.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"tokens.csv":  tokens,
	}
	if s.opts.kubeletClientCert {
		crt, key, err := clientCert(caCert, caKey, "kube-apiserver-kubelet-client", "system:masters", now)
		if err != nil {
			return err
		}
		files["kubelet-client.crt"], files["kubelet-client.key"] = crt, key
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(s.dir, "cert-dir"), 0o700)
}

// clientCert issues a client certificate (PEM) for cn in group org.
func clientCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn, org string, now time.Time) (crtPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{org}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// validUserName: a name that fits a field of the token file, which is CSV.
func validUserName(name string) bool {
	return name != "" && !strings.ContainsAny(name, ",\"\r\n")
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
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

// Tail returns the last n lines of a file, for error messages about a
// child process; the file's own error in parentheses when it cannot be read.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
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

func (s *APIServer) config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAPEM()},
		// client-go's default of 5 QPS would throttle tests that create many
		// objects; the server side has no priority and fairness either.
		QPS:   1000,
		Burst: 2000,
	}
}

// Config returns a new admin (system:masters) client configuration.
func (s *APIServer) Config() *rest.Config { return s.config(s.adminToken) }

// UserConfig returns a new client configuration for a WithTokenUser user.
func (s *APIServer) UserConfig(name string) (*rest.Config, error) {
	for _, u := range s.opts.tokenUsers {
		if u.name == name {
			return s.config(u.token), nil
		}
	}
	return nil, fmt.Errorf("kubetest: no token user %q (WithTokenUser)", name)
}

// SaveUserKubeconfig writes a kubeconfig for a WithTokenUser user to path,
// with namespace as its context's namespace ("default" when empty).
func (s *APIServer) SaveUserKubeconfig(path, name, namespace string) error {
	for _, u := range s.opts.tokenUsers {
		if u.name == name {
			return s.writeKubeconfig(path, u.name, u.token, namespace)
		}
	}
	return fmt.Errorf("kubetest: no token user %q (WithTokenUser)", name)
}

// CAFile returns the path of ca.crt, the CA of the serving certificate and
// of the WithKubeletClientCert client certificate.
func (s *APIServer) CAFile() string { return filepath.Join(s.dir, "ca.crt") }

// UnprivilegedConfig returns a new client configuration for the unprivileged
// user (UnprivilegedUser unless WithUserNames).
func (s *APIServer) UnprivilegedConfig() *rest.Config { return s.config(s.unprivToken) }

// Client returns an admin clientset.
func (s *APIServer) Client(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		tb.Fatalf("kubetest: admin clientset: %v", err)
	}
	return c
}

// CreateNamespace creates a namespace with the admin client.
func (s *APIServer) CreateNamespace(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.Client(tb).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("kubetest: creating namespace %s: %v", name, err)
	}
}

// WriteKubeconfig writes an admin kubeconfig for URL() to path (mode 0600),
// with the CA embedded.
func (s *APIServer) WriteKubeconfig(tb testing.TB, path string) {
	tb.Helper()
	if err := s.SaveKubeconfig(path, ""); err != nil {
		tb.Fatalf("%v", err)
	}
}

// WriteUnprivilegedKubeconfig writes a kubeconfig for the unprivileged user.
func (s *APIServer) WriteUnprivilegedKubeconfig(tb testing.TB, path string) {
	tb.Helper()
	if err := s.SaveUnprivilegedKubeconfig(path, ""); err != nil {
		tb.Fatalf("%v", err)
	}
}

// SaveKubeconfig is WriteKubeconfig for programs without a testing.TB, with
// namespace as its context's namespace ("default" when empty).
func (s *APIServer) SaveKubeconfig(path, namespace string) error {
	return s.writeKubeconfig(path, s.adminUser, s.adminToken, namespace)
}

// SaveUnprivilegedKubeconfig is WriteUnprivilegedKubeconfig for programs
// without a testing.TB, with namespace as its context's namespace ("default"
// when empty).
func (s *APIServer) SaveUnprivilegedKubeconfig(path, namespace string) error {
	return s.writeKubeconfig(path, s.unprivUser, s.unprivToken, namespace)
}

func (s *APIServer) writeKubeconfig(path, user, token, namespace string) error {
	if namespace == "" {
		namespace = "default"
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.CAPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "kubetest"
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = clientcmd.WriteToFile(*cfg, path)
	}
	if err != nil {
		return fmt.Errorf("kubetest: writing kubeconfig %s: %w", path, err)
	}
	return nil
}
