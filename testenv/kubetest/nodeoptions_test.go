package kubetest_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// TestNodeOptions checks the options a real node (e2e/realnode) uses,
// without a node: the serving certificate covers the Service CIDR's first
// address, token users get the rights RBAC's bootstrap policy gives their
// names, the kubelet client certificate exists, and ServiceAccount admission
// is on (a Pod in a namespace without its default ServiceAccount is refused).
func TestNodeOptions(t *testing.T) {
	srv := kubetest.Start(t,
		kubetest.WithServiceClusterIPRange("198.19.0.0/20"),
		kubetest.WithServiceAccountAdmission(),
		kubetest.WithNodeAuthorization(),
		kubetest.WithKubeletClientCert(),
		kubetest.WithTokenUser("system:kube-proxy"),
		kubetest.WithTokenUser("system:node:n1", "system:nodes"),
		kubetest.WithAPIServerArgs("--allow-privileged=true"),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	data, err := os.ReadFile(filepath.Join(srv.Dir(), "serving.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("198.19.0.1"); err != nil {
		t.Errorf("serving certificate does not cover the kubernetes Service IP: %v", err)
	}
	if err := cert.VerifyHostname("10.96.0.1"); err == nil {
		t.Errorf("serving certificate covers 10.96.0.1, the default range's, not this one's")
	}
	for _, f := range []string{"kubelet-client.crt", "kubelet-client.key"} {
		if _, err := os.Stat(filepath.Join(srv.Dir(), f)); err != nil {
			t.Errorf("WithKubeletClientCert: %v", err)
		}
	}
	if got, want := srv.CAFile(), filepath.Join(srv.Dir(), "ca.crt"); got != want {
		t.Errorf("CAFile() = %s, want %s", got, want)
	}

	// kube-proxy's user may list Services (ClusterRole system:node-proxier)
	// but not Secrets.
	cfg, err := srv.UserConfig("system:kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	proxy := kubernetes.NewForConfigOrDie(cfg)
	if _, err := proxy.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("kube-proxy user listing Services: %v", err)
	}
	if _, err := proxy.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("kube-proxy user listing Secrets: %v, want 403", err)
	}
	// The Node authorizer lets a node read its own Node, nobody else's
	// Secrets.
	cfg, err = srv.UserConfig("system:node:n1")
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(cfg)
	if _, err := node.CoreV1().Secrets("default").Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node user getting an unrelated Secret: %v, want 403", err)
	}
	if _, err := srv.UserConfig("nobody"); err == nil {
		t.Error("UserConfig of an unknown user succeeded")
	}
	if err := srv.SaveUserKubeconfig(filepath.Join(t.TempDir(), "kc"), "system:kube-proxy", ""); err != nil {
		t.Error(err)
	}

	// No controller manager runs, so default/default does not exist and
	// ServiceAccount admission refuses the Pod.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	_, err = srv.Client(t).CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "serviceaccount") {
		t.Errorf("creating a Pod without the default ServiceAccount: %v, want ServiceAccount admission to refuse it", err)
	}
}

// TestNodeOptionsValidation: bad node options fail Launch before anything
// starts.
func TestNodeOptionsValidation(t *testing.T) {
	dir := t.TempDir()
	for name, opts := range map[string][]kubetest.Option{
		"loopback endpoints": {kubetest.WithEndpointReconciler()},
		"bad service range":  {kubetest.WithServiceClusterIPRange("198.19.0.0")},
		"full /32 range":     {kubetest.WithServiceClusterIPRange("198.19.0.7/32")},
		"duplicate user":     {kubetest.WithTokenUser("u"), kubetest.WithTokenUser("u")},
		"user with a comma":  {kubetest.WithTokenUser("a,b")},
		"group with a quote": {kubetest.WithTokenUser("u", `g"`)},
	} {
		if _, err := kubetest.Launch(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")), opts...); err == nil {
			t.Errorf("%s: Launch succeeded, want an error", name)
		}
	}
}
