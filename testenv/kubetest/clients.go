package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// config returns a new client configuration that authenticates with token.
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

// writeKubeconfig writes a kubeconfig for user with token to path.
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
