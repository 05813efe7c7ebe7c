package kubetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/dcs/kubernetes/kubetest"
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
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  "198.18.0.10",
		PodIPs: []corev1.PodIP{{IP: "198.18.0.10"}},
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}},
	}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod status: %v", err)
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
