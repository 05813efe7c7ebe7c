package onnode

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mysqlha/mysqlha/e2e/realnode"
)

const (
	namespace   = "onnode"
	clusterName = "mysqlha" // the base's mysqlha.io/cluster label
	roleLabel   = "mysqlha.io/role"
	appUser     = "app"
	appPassword = "test-only-app-password"
)

// cluster is the deployment under test.
type cluster struct {
	t      *testing.T
	node   *realnode.Node
	client kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// objects is what kustomize built, as applied.
	objects []*unstructured.Unstructured
	// primaryIP is the ClusterIP of the primary Service.
	primaryIP string

	viewsOnce sync.Once
	v         *views

	// spoiled: why the running test's changes leave the cluster unfit for
	// the next test (health_test.go); broken: recreating it failed.
	spoiled string
	broken  error
}

// deploy builds deploy/overlays/local-node with the images set, as
// `kustomize edit set image` would, applies it into namespace, and creates
// the application's database and user on the first primary.
func deploy(ctx context.Context, t *testing.T, n *realnode.Node, root, mariadbRef, agentRef string) (*cluster, error) {
	objs, err := build(root, mariadbRef, agentRef)
	if err != nil {
		return nil, err
	}
	c := &cluster{t: t, node: n, client: n.Client(), objects: objs}
	if c.dyn, err = dynamic.NewForConfig(n.Config()); err != nil {
		return nil, err
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.client.Discovery()))
	if err := n.CreateNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	if err := c.createVolumes(ctx); err != nil {
		return nil, err
	}
	if err := c.apply(ctx, objs); err != nil {
		return nil, err
	}
	svc, err := c.client.CoreV1().Services(namespace).Get(ctx, clusterName+"-primary", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c.primaryIP = svc.Spec.ClusterIP
	return c, nil
}

// build runs kustomize on a kustomization of the local-node overlay that
// only sets the images and the namespace.
func build(root, mariadbRef, agentRef string) ([]*unstructured.Unstructured, error) {
	dir, err := os.MkdirTemp("", "onnode-kustomize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// kustomize takes a resource path relative to the kustomization.
	overlay, err := filepath.Rel(dir, filepath.Join(root, "deploy", "overlays", "local-node"))
	if err != nil {
		return nil, err
	}
	name, tag := splitRef(mariadbRef)
	aname, atag := splitRef(agentRef)
	// The agents' API TLS, made as an operator does by hand
	// (deploy/tls/make-api-tls.sh), in the Secret the StatefulSet mounts.
	script := exec.Command("bash", filepath.Join(root, "deploy", "tls", "make-api-tls.sh"), filepath.Join(dir, "tls"))
	if out, err := script.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("deploy/tls/make-api-tls.sh: %v: %s", err, out)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - %s
images:
  - {name: localhost/mysqlha/mariadb, newName: %s, newTag: %q}
  - {name: localhost/mysqlha/agent, newName: %s, newTag: %q}
secretGenerator:
  - name: mysqlha-api-tls
    files: [tls.crt=tls/tls.crt, tls.key=tls/tls.key, ca.crt=tls/ca.crt]
generatorOptions:
  disableNameSuffixHash: true
`, namespace, overlay, name, tag, aname, atag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kusttypes.LoadRestrictionsNone // the overlay lives outside dir
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		j, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

func splitRef(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// apply creates or updates objs with server-side apply, as kubectl apply
// --server-side does.
func (c *cluster) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		_, err = c.dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "onnode-test", Force: &force})
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	return nil
}

func (c *cluster) pods(ctx context.Context) []corev1.Pod {
	l, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "mysqlha.io/cluster=" + clusterName})
	if err != nil {
		c.t.Fatalf("listing pods: %v", err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return l.Items
}

// containerStates is a pod's phase and each container's state in one line.
func containerStates(p corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		state := "running"
		switch {
		case s.State.Waiting != nil:
			state = "waiting " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
		case s.State.Terminated != nil:
			state = fmt.Sprintf("terminated %s exit %d", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s %s ready=%t restarts=%d", s.Name, strings.TrimSpace(state), s.Ready, s.RestartCount))
	}
	return strings.Join(parts, "; ")
}

func podReady(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// state is one look at the cluster: pods, their roles and the primary
// Service's endpoints.
type state struct {
	pods      []corev1.Pod
	primaries []string // pods labelled primary
	endpoints []string // addresses in the primary Service's EndpointSlices
	ready     int
}

func (c *cluster) look(ctx context.Context) state {
	var s state
	s.pods = c.pods(ctx)
	for _, p := range s.pods {
		if p.Labels[roleLabel] == "primary" {
			s.primaries = append(s.primaries, p.Name)
		}
		if podReady(p) {
			s.ready++
		}
	}
	s.endpoints = c.primaryEndpoints(ctx)
	return s
}

func (s state) String() string {
	var b strings.Builder
	for _, p := range s.pods {
		fmt.Fprintf(&b, "%s(%s %s ready=%v role=%q) ", p.Name, p.Status.PodIP, p.Status.Phase, podReady(p), p.Labels[roleLabel])
	}
	fmt.Fprintf(&b, "primary endpoints %v", s.endpoints)
	return b.String()
}

// primaryEndpoints lists the ready addresses of the primary Service.
func (c *cluster) primaryEndpoints(ctx context.Context) []string {
	return c.endpoints(ctx, clusterName+"-primary")
}

// endpoints lists the ready addresses of service, sorted.
func (c *cluster) endpoints(ctx context.Context, service string) []string {
	l, err := c.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		c.t.Fatalf("listing EndpointSlices: %v", err)
	}
	var out []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// healthy: 3 pods Ready, exactly one labelled primary, and the primary
// Service's endpoints are exactly that pod.
func (s state) healthy() (corev1.Pod, bool) {
	if len(s.pods) != len(members) || s.ready != len(members) || len(s.primaries) != 1 {
		return corev1.Pod{}, false
	}
	for _, p := range s.pods {
		if p.Name == s.primaries[0] && slices.Equal(s.endpoints, []string{p.Status.PodIP}) {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// waitHealthy waits until the cluster is healthy and returns its primary.
func (c *cluster) waitHealthy(timeout time.Duration) corev1.Pod {
	c.t.Helper()
	p, err := c.awaitHealthy(timeout)
	if err != nil {
		c.dump(context.Background(), err.Error())
		c.t.Fatal(err)
	}
	return p
}

// awaitHealthy is waitHealthy with the failure returned.
func (c *cluster) awaitHealthy(timeout time.Duration) (corev1.Pod, error) {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		s := c.look(ctx)
		if p, ok := s.healthy(); ok {
			c.ensureApp(ctx, p)
			return p, nil
		}
		if time.Now().After(deadline) {
			return corev1.Pod{}, fmt.Errorf("cluster not healthy within %s: %s", timeout, s)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ensureApp creates the application database and user on the primary, as
// root over the pod's socket (root has no network access): logged, so it
// replicates, and every member recreated later gets it from the binlog.
func (c *cluster) ensureApp(ctx context.Context, primary corev1.Pod) {
	db := c.open(primary.Status.PodIP)
	defer db.Close()
	if err := db.PingContext(ctx); err == nil {
		return
	}
	sql := fmt.Sprintf("CREATE DATABASE IF NOT EXISTS app; CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY '%s'; "+
		"GRANT ALL ON app.* TO %[1]s@'%%'; CREATE TABLE IF NOT EXISTS app.w (id BIGINT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6)); %[3]s",
		appUser, appPassword, bankSchema+registerSchema)
	if out, err := c.execSQL(ctx, primary.Name, sql); err != nil {
		c.t.Fatalf("creating the application user on %s: %v\n%s", primary.Name, err, out)
	}
}

// execSQL runs statements as root inside pod's mariadb container, as
// `kubectl exec` would.
func (c *cluster) execSQL(ctx context.Context, pod, statements string) (string, error) {
	return c.exec(ctx, pod, "mariadb", "bash", "-c", `MYSQL_PWD="$(cat "$MARIADB_ROOT_PASSWORD_FILE")" exec mariadb -uroot -e "$1"`, "sql", statements)
}

// exec runs command in a container of pod, as `kubectl exec` does, and
// returns its output (stdout and stderr).
func (c *cluster) exec(ctx context.Context, pod, container string, command ...string) (string, error) {
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Stdout: true, Stderr: true, Command: command},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.node.Config(), "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	return out.String(), err
}

// open is a pool for the application user at addr (a pod IP or the
// Service's ClusterIP), with short timeouts and no idle connections, so
// that every statement opens a connection that kube-proxy routes afresh.
func (c *cluster) open(host string) *sql.DB { return c.openTimeout(host, 2*time.Second) }

// openTimeout is open with another read and write timeout, for a
// statement meant to run long.
func (c *cluster) openTimeout(host string, rw time.Duration) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = appUser, appPassword, "tcp", net.JoinHostPort(host, "3306"), "app"
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, rw, rw
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(0)
	return db
}

// missing returns the ids of acked that pod's mysqld does not have.
func (c *cluster) missing(ctx context.Context, pod corev1.Pod, acked []int64) ([]int64, error) {
	db := c.open(pod.Status.PodIP)
	defer db.Close()
	have, err := writtenIDs(ctx, db, "w")
	if err != nil {
		return nil, err
	}
	return absent(acked, have), nil
}

// writtenIDs are the ids in the writer's table (w in the database db
// uses, or as table names it).
func writtenIDs(ctx context.Context, db *sql.DB, table string) (map[int64]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM "+table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		have[id] = true
	}
	return have, rows.Err()
}

// absent lists the ids of want that have lacks.
func absent(want []int64, have map[int64]bool) []int64 {
	var out []int64
	for _, id := range want {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}

// waitAllHave waits until every pod has every acked id.
func (c *cluster) waitAllHave(acked []int64, timeout time.Duration) {
	c.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		var detail []string
		for _, p := range c.pods(ctx) {
			m, err := c.missing(ctx, p, acked)
			if err != nil || len(m) > 0 {
				detail = append(detail, fmt.Sprintf("%s lacks %d of %d acknowledged writes (%v)", p.Name, len(m), len(acked), err))
			}
		}
		if len(detail) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("acknowledged writes missing after %s: %s", timeout, strings.Join(detail, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dump logs each pod's containers' states and last lines, for the failure
// why, which it names first (CI shows a failure's first lines): a container
// stuck waiting (an init container failing, a crash-loop back-off) shows
// up in its state, not in any log.
func (c *cluster) dump(ctx context.Context, why string) {
	c.t.Logf("===== the cluster, after this failure: %s", why)
	pods := c.pods(ctx)
	// A pod missing or not Ready: the controllers', the scheduler's or the
	// kubelet's story, told by the events and the node's logs.
	stuck := len(pods) < len(members)
	for _, p := range pods {
		c.t.Logf("----- %s: %s", p.Name, containerStates(p))
		if !podReady(p) {
			stuck = true
			c.t.Logf("----- %s: node %q, conditions %s", p.Name, p.Spec.NodeName, podConditions(p))
		}
		for _, ctr := range []string{"mysqlha-agent-binaries", "mariadb", "agent"} {
			tail := int64(40)
			b, err := c.client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr, TailLines: &tail}).DoRaw(ctx)
			c.t.Logf("----- %s/%s (%v) -----\n%s", p.Name, ctr, err, withoutProbeNoise(b))
		}
	}
	if stuck {
		if evs, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range evs.Items[max(0, len(evs.Items)-30):] {
				c.t.Logf("event %s %s/%s %s: %s", e.LastTimestamp.Format(time.RFC3339), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		var b bytes.Buffer
		c.node.DumpLogs(&b, 30)
		c.t.Logf("the node's components:\n%s", b.String())
	}
}

// withoutProbeNoise drops the server's note of each liveness probe
// (mariadb-admin ping connects without an account and is refused, which
// still proves mysqld answers), so that 40 lines show more than probes.
func withoutProbeNoise(log []byte) []byte {
	var out [][]byte
	for _, line := range bytes.SplitAfter(log, []byte("\n")) {
		if !bytes.Contains(line, []byte("Access denied for user 'mysql'@'localhost' (using password: NO)")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

func podConditions(p corev1.Pod) string {
	var out []string
	for _, cond := range p.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return strings.Join(out, "; ")
}
