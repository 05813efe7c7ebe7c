package kubetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

func TestLeaseForbiddenForUnprivileged(t *testing.T) {
	begin := time.Now()
	srv := kubetest.Start(t)
	t.Logf("kube-apiserver %s (with etcd) ready in %v at %s", kubetest.KubernetesVersion, time.Since(begin).Round(time.Millisecond), srv.URL())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv.CreateNamespace(t, "mysqlha-test")
	admin := srv.Client(t)
	holder := "pod-0"
	dur := int32(10)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-leader", Namespace: "mysqlha-test"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur},
	}
	if _, err := admin.CoordinationV1().Leases("mysqlha-test").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating lease: %v", err)
	}
	got, err := admin.CoordinationV1().Leases("mysqlha-test").Get(ctx, "mysqlha-leader", metav1.GetOptions{})
	if err != nil || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != holder {
		t.Fatalf("admin get lease: %v, %v", got, err)
	}

	unpriv, err := kubernetes.NewForConfig(srv.UnprivilegedConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = unpriv.CoordinationV1().Leases("mysqlha-test").Get(ctx, "mysqlha-leader", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("unprivileged get lease: err = %v, want 403 Forbidden", err)
	}

	// The admin kubeconfig works through clientcmd, as agentctl will use it.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	srv.WriteKubeconfig(t, kc)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("loading kubeconfig: %v", err)
	}
	fromFile, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fromFile.CoordinationV1().Leases("mysqlha-test").Get(ctx, "mysqlha-leader", metav1.GetOptions{}); err != nil {
		t.Fatalf("get lease via kubeconfig: %v", err)
	}

	begin = time.Now()
	srv.Stop()
	t.Logf("kube-apiserver stopped in %v", time.Since(begin).Round(time.Millisecond))
	srv.Stop() // idempotent
	srv.Kill() // a no-op after Stop
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if _, err := admin.CoordinationV1().Leases("mysqlha-test").Get(sctx, "mysqlha-leader", metav1.GetOptions{}); err == nil {
		t.Fatal("get lease succeeded after Stop")
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, so that Start's failure path can be tested.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinaryNamesTheFix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	t.Setenv("KUBE_BIN_DIR", dir)
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kubetest.Start(rec)
	}()
	<-done
	want := "kube-apiserver not found at " + filepath.Join(dir, "kube-apiserver") + ": run `make kube-bin`"
	if !strings.Contains(rec.msg, want) {
		t.Fatalf("Start with no binary failed with %q, want it to contain %q", rec.msg, want)
	}
}

func TestBinDirDefault(t *testing.T) {
	t.Setenv("KUBE_BIN_DIR", "")
	dir, err := kubetest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// Tests run in the package directory, two levels below the repo root.
	root, _ := filepath.Abs("../..")
	if want := filepath.Join(root, "bin", "k8s-"+kubetest.KubernetesVersion); dir != want {
		t.Fatalf("BinDir() = %q, want %q", dir, want)
	}
}

// Restart brings a stopped apiserver back on the same URL and storage: a
// client made before the outage works again, and sees what was written
// before it. Restarting a running server is refused.
func TestRestartKeepsURLAndState(t *testing.T) {
	srv := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv.CreateNamespace(t, "restart")
	c := srv.Client(t)
	if err := srv.Restart(); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Restart of a running apiserver: %v, want a refusal", err)
	}
	url := srv.URL()
	srv.Stop()
	if _, err := c.CoreV1().Namespaces().Get(ctx, "restart", metav1.GetOptions{}); err == nil {
		t.Fatal("the stopped apiserver still answers")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if srv.URL() != url {
		t.Fatalf("URL after Restart %s, want %s", srv.URL(), url)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, "restart", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace made before the restart: %v", err)
	}
}
