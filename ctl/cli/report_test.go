package cli

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/connect"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// agentctl report against a real kube-apiserver: the pods' state and the
// Events of the cluster's pods come from the API, and no other cluster's; a
// Secret in the namespace, and a password in a pod's spec, appear nowhere.
func TestReportOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	isolateKube(t)
	api := kubetest.Start(t)
	api.CreateNamespace(t, "db")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connect.Open(connect.Settings{Kind: "kubernetes", RESTConfig: api.Config(), Namespace: "db",
		Cluster: "demo", Member: "demo-0", Timeout: 5 * time.Second}, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Store.UpdateMember(ctx, dcs.Member{Role: dcs.RolePrimary, MySQLAddr: "10.0.0.1:3306"}); err != nil {
		t.Fatal(err)
	}
	admin := api.Client(t)
	const secret = "the-root-password-0123456789"
	if _, err := admin.CoreV1().Secrets("db").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-credentials"},
		StringData: map[string]string{"root-password": secret}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"demo-0", "other-0"} {
		cluster := strings.TrimSuffix(name, "-0")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"mysqlha.io/cluster": cluster}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent",
				Env: []corev1.EnvVar{{Name: "MYSQL_ROOT_PASSWORD", Value: secret}}}}}}
		if _, err := admin.CoreV1().Pods("db").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + ".promoted"}, Reason: "Promoted", Message: name + " took the lock",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: "db"}, Type: "Normal",
			LastTimestamp: metav1.Now(), Count: 1}
		if _, err := admin.CoreV1().Events("db").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	api.WriteKubeconfig(t, kc)
	path := filepath.Join(t.TempDir(), "report.tar.gz")
	var out, errb strings.Builder
	err = Run(ctx, Agentctl, []string{"report", "demo", "--kubeconfig=" + kc, "-n", "db", "--file=" + path},
		Deps{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("agentctl report: %v\n%s%s", err, out.String(), errb.String())
	}
	files := untarReport(t, path)
	for name, want := range map[string]string{
		"pods.json":   `"name": "demo-0"`,
		"events.json": "demo-0 took the lock",
		"status.json": `"cluster": "demo"`,
	} {
		body, ok := files[name]
		if !ok || !strings.Contains(body, want) {
			t.Errorf("%s (present %v) lacks %q:\n%s", name, ok, want, body)
		}
	}
	// No kubelet runs here: the log is empty or its file says why.
	_, log := files["logs/demo-0-agent.log"]
	_, logErr := files["logs/demo-0-agent.log.error"]
	if !log && !logErr {
		t.Error("no logs/demo-0-agent.log, nor a .error file saying why")
	}
	if strings.Contains(files["pods.json"], "other-0") || strings.Contains(files["events.json"], "other-0") {
		t.Errorf("another cluster's pod or Event is in the report:\n%s\n%s", files["pods.json"], files["events.json"])
	}
	for name, body := range files {
		if strings.Contains(body, secret) {
			t.Errorf("%s holds a secret", name)
		}
	}
	t.Logf("agentctl report printed:\n%s", out.String())
}

func untarReport(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		_, name, _ := strings.Cut(hdr.Name, "/")
		files[name] = string(b)
	}
}
