package demo

import (
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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A minimal, testing.TB-free launcher for a real kube-apiserver and
// kube-controller-manager, built by `make kube-bin`. It follows
// dcs/kubernetes/kubetest (same flags, same certificate scheme), which cannot
// be reused here because every entry point of it takes a testing.TB.
//
// Users: an admin token (group system:masters) for the demo itself and
// agentctl, and AgentUser, who holds only the agent's RBAC Role.

const (
	kubeAdminUser = "mysqlha-demo-admin"
	// kubeAgentUser is the agents' identity: bound to a Role with exactly the
	// rules the agent declares (leases; pods get/patch; events create).
	kubeAgentUser = "mysqlha-agent"
	kubeReady     = 60 * time.Second
)

type controlPlane struct {
	dir        string
	url        string
	caPEM      []byte
	adminToken string
	agentToken string
	saKeyFile  string
	apiserver  *childProcess
	controller *childProcess
}

// childProcess is a control-plane process with its log file.
type childProcess struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
}

func startChild(name, bin, dir, log string, args []string) (*childProcess, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &childProcess{name: name, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(c.exited) }()
	return c, nil
}

func (c *childProcess) pid() int { return c.cmd.Process.Pid }

// stop sends SIGTERM, then SIGKILL after grace, and waits.
func (c *childProcess) stop(grace time.Duration) {
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
}

func (c *childProcess) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// writeCerts makes a CA, a serving certificate for 127.0.0.1, a
// service-account key and the static token file.
func (cp *controlPlane) writeCerts() error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mysqlha-demo-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	cp.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	cp.adminToken, cp.agentToken = randomToken(), randomToken()
	cp.saKeyFile = filepath.Join(cp.dir, "sa.key")
	files := map[string][]byte{
		"ca.crt":      cp.caPEM,
		"serving.crt": append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), cp.caPEM...),
		"serving.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"admin-token": []byte(cp.adminToken + "\n"),
		// token,user,uid,"groups"
		"tokens.csv": fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
			cp.adminToken, kubeAdminUser, kubeAdminUser, cp.agentToken, kubeAgentUser, kubeAgentUser),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(cp.dir, "cert-dir"), 0o700)
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// startAPIServer runs kube-apiserver against etcdURL and waits for /readyz.
func (cp *controlPlane) startAPIServer(binDir, etcdURL string) error {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	cp.url = "https://127.0.0.1:" + strconv.Itoa(port)
	f := func(name string) string { return filepath.Join(cp.dir, name) }
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--advertise-address=127.0.0.1",
		// The default/kubernetes Endpoints would reject the loopback address.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + f("cert-dir"),
		"--tls-cert-file=" + f("serving.crt"),
		"--tls-private-key-file=" + f("serving.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + f("sa.key"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--token-auth-file=" + f("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		// No kubelet mounts tokens here; the admission plugin would only
		// demand a default ServiceAccount before any Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	cp.apiserver, err = startChild("kube-apiserver", filepath.Join(binDir, "kube-apiserver"), cp.dir, f("kube-apiserver.log"), args)
	if err != nil {
		return err
	}
	hc, err := cp.httpClient()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kubeReady)
	last := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		if !cp.apiserver.running() {
			return fmt.Errorf("kube-apiserver exited; last lines of %s:\n%s", cp.apiserver.log, tail(cp.apiserver.log, 30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			err = fmt.Errorf("/readyz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		cancel()
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within %v: %v; last lines of %s:\n%s", kubeReady, last, cp.apiserver.log, tail(cp.apiserver.log, 30))
}

func (cp *controlPlane) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.caPEM) {
		return nil, errors.New("bad CA PEM")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, nil
}

// startControllerManager runs the EndpointSlice and ServiceAccount
// controllers only; the caller waits for them (see kubeBackend).
func (cp *controlPlane) startControllerManager(binDir string) error {
	kubeconfig := filepath.Join(cp.dir, "controller-manager.kubeconfig")
	if err := cp.writeKubeconfig(kubeconfig, kubeAdminUser, cp.adminToken, "default"); err != nil {
		return err
	}
	var err error
	cp.controller, err = startChild("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), cp.dir,
		filepath.Join(cp.dir, "kube-controller-manager.log"), []string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=endpointslice-controller,serviceaccount-controller,serviceaccount-token-controller",
			"--service-account-private-key-file=" + cp.saKeyFile,
			"--root-ca-file=" + filepath.Join(cp.dir, "ca.crt"),
			"--use-service-account-credentials=false",
			"--leader-elect=false",
			"--secure-port=0",
		})
	return err
}

func (cp *controlPlane) restConfig() *rest.Config {
	return &rest.Config{Host: cp.url, BearerToken: cp.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM}, QPS: 1000, Burst: 2000}
}

func (cp *controlPlane) writeKubeconfig(path, user, token, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mysqlha-demo"] = &clientcmdapi.Cluster{Server: cp.url, CertificateAuthorityData: cp.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["mysqlha-demo"] = &clientcmdapi.Context{Cluster: "mysqlha-demo", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "mysqlha-demo"
	return clientcmd.WriteToFile(*cfg, path)
}

func (cp *controlPlane) stop() {
	if cp.controller != nil {
		cp.controller.stop(5 * time.Second)
	}
	if cp.apiserver != nil {
		cp.apiserver.stop(10 * time.Second)
	}
}
