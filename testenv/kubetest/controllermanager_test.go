package kubetest_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// TestEndpointSlice runs the controller manager and checks that a ready Pod
// shows up in its Service's EndpointSlice. The apiserver listens on all
// addresses and advertises 127.0.0.2 (loopback standing in for a bridge IP),
// which also checks that the serving certificate covers the advertise address.
func TestEndpointSlice(t *testing.T) {
	begin := time.Now()
	srv := kubetest.Start(t, kubetest.WithBindAddress("0.0.0.0"), kubetest.WithAdvertiseAddress("127.0.0.2"))
	if !strings.HasPrefix(srv.URL(), "https://127.0.0.2:") {
		t.Fatalf("URL() = %s, want the advertise address", srv.URL())
	}
	started := time.Now()
	srv.StartControllerManager(t)
	t.Logf("apiserver ready in %v, controller manager in %v more",
		started.Sub(begin).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))

	const ns = "mysqlha-eps"
	srv.CreateNamespace(t, ns)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql-primary", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "mysql"},
			Ports:    []corev1.ServicePort{{Name: "mysql", Port: 3306}},
		},
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("service: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql-0", Namespace: ns, Labels: map[string]string{"app": "mysql"}},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "mysqld", Image: "mariadb"}},
		},
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod: %v", err)
	}
	// No kubelet: the test plays its part. The IP is only data.
	if err := kubetest.ReportPodReady(ctx, c, pod, "198.18.0.10", "198.18.0.1"); err != nil {
		t.Fatal(err)
	}

	for {
		slices, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=mysql-primary",
		})
		if err != nil {
			t.Fatalf("listing EndpointSlices: %v", err)
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) > 0 && ep.Addresses[0] == "198.18.0.10" &&
					ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no ready endpoint for mysql-0 in %v", slices.Items)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestLaunchWithoutTB runs the TB-free entry points as the demo does: own
// user names, kubeconfigs with a namespace, a controller manager, and Close
// ending every process and etcd.
func TestLaunchWithoutTB(t *testing.T) {
	binDir, err := kubetest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := kubetest.Launch(dir, kubetest.WithBinDir(binDir), kubetest.WithUserNames("demo-admin", "demo-agent"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	if srv.Dir() != dir {
		t.Errorf("Dir() = %s, want %s", srv.Dir(), dir)
	}
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil || !bytes.Equal(ca, srv.CAPEM()) {
		t.Errorf("Dir()/ca.crt is not CAPEM(): %v", err)
	}
	cm, err := srv.LaunchControllerManager()
	if err != nil {
		t.Fatalf("LaunchControllerManager: %v", err)
	}

	// The unprivileged kubeconfig names the namespace, and the apiserver
	// knows its user by the given name.
	kc := filepath.Join(dir, "agent.kubeconfig")
	if err := srv.SaveUnprivilegedKubeconfig(kc, "demo-ns"); err != nil {
		t.Fatal(err)
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kc}, &clientcmd.ConfigOverrides{})
	if ns, _, err := loader.Namespace(); err != nil || ns != "demo-ns" {
		t.Errorf("kubeconfig namespace %q, %v; want demo-ns", ns, err)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.CoordinationV1().Leases("demo-ns").Get(ctx, "x", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "demo-agent"`) {
		t.Errorf("unprivileged get: %v, want 403 for User \"demo-agent\"", err)
	}

	pids := []int{srv.Pid(), cm.Pid()}
	cm.Kill()
	srv.Close()
	closed = true
	srv.Close() // idempotent
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Close (kill -0: %v)", pid, err)
		}
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.Etcd.Endpoints()[0], "http://"), time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("etcd still accepts connections after Close")
	}
}
